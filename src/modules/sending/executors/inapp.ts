import type { InappService } from '../../inapp/inapp.service.js';
import { type ChannelExecutor, str } from './types.js';

export function inappExecutor(inapp: InappService): ChannelExecutor {
  return {
    fromInline: (body) => (body.inapp ? { title: body.inapp.title, redirectURL: body.inapp.url, imageURL: body.inapp.image } : null),
    preview: (c) => str(c.title) ?? '',
    async deliver({ message, content, body }) {
      const stored = await inapp.deliver({
        accountId: message.account_id,
        envId: message.env_id,
        userId: message.user_id,
        trackingId: message.tracking_id,
        notificationId: message.notification_id,
        ...(message.sub_notification_id ? { subNotificationId: message.sub_notification_id } : {}),
        title: str(content.title) ?? '',
        ...(str(content.redirectURL) ? { redirectURL: str(content.redirectURL) } : {}),
        ...(str(content.imageURL) ? { imageURL: str(content.imageURL) } : {}),
        parameters: (body.parameters ?? body.mergeTags ?? {}) as Record<string, unknown>,
      });
      return { result: { providerMessageId: stored.notification.id }, delivered: true };
    },
  };
}


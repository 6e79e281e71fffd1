import type { InappService, StoreInappInput } from '../../inapp/inapp.service.js';
import { type ChannelExecutor, type DeliverInput, str } from './types.js';

function storeInput({ message, content, body }: DeliverInput): StoreInappInput {
  return {
    accountId: message.account_id,
    envId: message.env_id,
    userId: message.user_id,
    trackingId: message.tracking_id,
    notificationId: message.notification_id,
    ...(message.sub_notification_id ? { subNotificationId: message.sub_notification_id } : {}),
    title: str(content.title) ?? '',
    ...(str(content.redirectURL) ? { redirectURL: str(content.redirectURL) } : {}),
    ...(str(content.imageURL) ? { imageURL: str(content.imageURL) } : {}),
    parameters: body.parameters ?? body.mergeTags ?? {},
  };
}

export function inappExecutor(inapp: InappService): ChannelExecutor {
  return {
    fromInline: (body) => (body.inapp ? { title: body.inapp.title, redirectURL: body.inapp.url, imageURL: body.inapp.image } : null),
    preview: (c) => str(c.title) ?? '',
    // Deliveries queued as jobs (before this process delivered in-app inline) still run here.
    async deliver(input) {
      const stored = await inapp.deliver(storeInput(input));
      return { result: { providerMessageId: stored.notification.id }, delivered: true };
    },
    async deliverInTransaction(trx, input) {
      const scope = storeInput(input);
      const stored = await inapp.store(trx, scope);
      return {
        result: { providerMessageId: stored.notification.id },
        delivered: true,
        ...(stored.created ? { afterCommit: () => inapp.publish(scope, [stored.notification]) } : {}),
      };
    },
  };
}

import type { EmailProviders } from '../../channels/email/registry.js';
import { DeliveryError, type DeliveryResult, type EmailAttachment } from '../../channels/types.js';
import type { Config } from '../../config.js';
import type { InappService } from '../inapp/inapp.service.js';
import type { SendChannel } from './channels.js';
import type { SendBody } from './sending.schemas.js';
import type { DeliveryRow, MessageRow } from './sending.tables.js';

/** What a channel needs to deliver one rendered content to one user. */
export interface DeliverInput {
  delivery: DeliveryRow;
  message: MessageRow;
  /** Rendered content as stored on the delivery (the same on every retry). */
  content: Record<string, unknown>;
  body: SendBody;
}

export interface DeliverOutcome {
  result: DeliveryResult;
  /** The channel confirms receipt itself (in-app: stored in the user's inbox). */
  delivered?: boolean;
  /** Channel-specific log fields, e.g. email_sent_message_id. */
  extra?: Record<string, unknown>;
}

export interface ChannelExecutor {
  /** Maps inline content of the send body to the channel's template-shaped content. */
  fromInline(body: SendBody): Record<string, unknown> | null;
  preview(content: Record<string, unknown>): string;
  deliver(input: DeliverInput): Promise<DeliverOutcome>;
}

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

export function emailExecutor(config: Config, providers: EmailProviders): ChannelExecutor {
  return {
    fromInline: (body) => (body.email ? { ...body.email } : null),
    preview: (c) => str(c.subject) ?? '',
    async deliver({ delivery, message, content, body }) {
      const options = body.options?.email ?? {};
      const provider = await providers.forEnvironment(message.account_id, message.env_id);
      const to = message.user_email;
      if (!to) throw new DeliveryError('NO_EMAIL', 'the user has no email address', { retryable: false });
      const attachments = (options.attachments ?? []).map(
        (a): EmailAttachment => (a.content ? { filename: a.filename, content: a.content, contentType: a.contentType } : { filename: a.filename, url: a.url ?? '', contentType: a.contentType }),
      );
      // One Message-ID per delivery: a retry or a redelivery after a crash carries the same id.
      const messageId = `${delivery.id}@clarion`;
      const result = await provider.send({
        from: {
          address: options.fromAddress ?? str(content.senderEmail) ?? config.defaultFromAddress,
          name: options.fromName ?? str(content.senderName) ?? config.defaultFromName,
        },
        to: { address: to },
        replyTo: options.replyToAddresses,
        cc: options.ccAddresses,
        bcc: options.bccAddresses,
        subject: str(content.subject) ?? '',
        html: str(content.html) ?? '',
        previewText: str(content.previewText),
        attachments,
        messageId,
        meta: { accountId: message.account_id, envId: message.env_id, trackingId: message.tracking_id, userId: message.user_id },
      });
      return {
        result,
        extra: {
          // As it appears in the Message-ID header, angle brackets included.
          email_sent_message_id: `<${(result.providerMessageId ?? messageId).replace(/^<|>$/g, '')}>`,
          ...(provider.name === 'outbox' ? { email_sent_internal: 'kept in the local outbox: no SMTP server is configured (GET /outbox)' } : {}),
        },
      };
    },
  };
}

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

export type Executors = Partial<Record<SendChannel, ChannelExecutor>>;

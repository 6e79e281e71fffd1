import type { EmailProviders } from '../../../channels/email/registry.js';
import { DeliveryError, type EmailAttachment } from '../../../channels/types.js';
import type { Config } from '../../../config.js';
import type { DomainSigningKey, DomainsService } from '../../domains/domains.service.js';
import type { EngagementService, TrackingSetting } from '../../engagement/engagement.service.js';
import { type ChannelExecutor, str } from './types.js';

/**
 * `engagement`: adds the List-Unsubscribe headers and, as the environment's switches say, open
 * and click tracking to every mail (the channel composes them; it knows no module).
 * `domains`: the From address must be the platform default sender or on a verified domain of the
 * account (else the email fails UNVERIFIED_SENDER, as the hosted service's log code says); mail
 * from a verified domain is DKIM-signed with its key, read once per batch and handed to the channel,
 * and leaves with its envelope sender on the domain's return-path name once that CNAME is published.
 */
export function emailExecutor(config: Config, providers: EmailProviders, engagement?: EngagementService, domains?: Pick<DomainsService, 'senderKeys' | 'isAllowedSender'>): ChannelExecutor {
  return {
    fromInline: (body) => (body.email ? { ...body.email } : null),
    preview: (c) => str(c.subject) ?? '',
    async deliver({ delivery, message, content, body }, scope) {
      const options = body.options?.email ?? {};
      // The route is read per batch (a settings change applies to the next batch), not per mail.
      const route = () => providers.forEnvironment(message.account_id, message.env_id);
      const provider = await (scope ? scope.once(`email-provider ${message.account_id} ${message.env_id}`, route) : route());
      const to = message.user_email;
      if (!to) throw new DeliveryError('NO_EMAIL', 'the user has no email address', { retryable: false });
      const attachments = (options.attachments ?? []).map(
        (a): EmailAttachment => (a.content ? { filename: a.filename, content: a.content, contentType: a.contentType } : { filename: a.filename, url: a.url ?? '', contentType: a.contentType }),
      );
      // One Message-ID per delivery: a retry or a redelivery after a crash carries the same id.
      const messageId = `${delivery.id}@clarion`;
      let decoration: ReturnType<EngagementService['emailDecoration']> | undefined;
      if (engagement) {
        const read = () => engagement.getTrackingSetting({ accountId: message.account_id, envId: message.env_id });
        const setting: TrackingSetting = await (scope ? scope.once(`email-tracking ${message.account_id} ${message.env_id}`, read) : read());
        decoration = engagement.emailDecoration(delivery, message, setting);
      }
      const fromAddress = options.fromAddress ?? str(content.senderEmail) ?? config.defaultFromAddress;
      let dkim: DomainSigningKey | undefined;
      if (domains) {
        const read = () => domains.senderKeys(message.account_id);
        const keys = await (scope ? scope.once(`sender-keys ${message.account_id}`, read) : read());
        if (!domains.isAllowedSender(fromAddress, keys)) {
          throw new DeliveryError(
            'UNVERIFIED_SENDER',
            `${fromAddress} is neither the platform default sender nor on a verified domain of the account (POST /domains adds one; publish its records)`,
            { retryable: false },
          );
        }
        dkim = keys.get(fromAddress.slice(fromAddress.lastIndexOf('@') + 1).toLowerCase());
      }
      const result = await provider.send({
        from: {
          address: fromAddress,
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
        ...(decoration ? { headers: decoration.headers, ...(decoration.tracking ? { tracking: decoration.tracking } : {}) } : {}),
        meta: { accountId: message.account_id, envId: message.env_id, trackingId: message.tracking_id, userId: message.user_id },
        ...(dkim ? { dkim: { domainName: dkim.domainName, keySelector: dkim.keySelector, privateKey: dkim.privateKey } } : {}),
        // Per delivery (VERP), so that a bounce sent back to it names the delivery it is about.
        ...(dkim?.returnPathDomain ? { returnPath: `bounce-${delivery.id}@${dkim.returnPathDomain}` } : {}),
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


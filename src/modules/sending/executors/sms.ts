import { CALLBACK_PATHS, publicBase, telephonyClient } from '../../../channels/telephony/endpoint.js';
import { mediaUrlProblem, smsEncoding } from '../../../channels/telephony/sms-content.js';
import { DeliveryError } from '../../../channels/types.js';
import type { Deps } from '../../../deps.js';
import type { NumbersService } from '../../telephony/numbers.service.js';
import type { TelephonyRepository } from '../../telephony/telephony.repository.js';
import type { UsersService } from '../../users/users.service.js';
import { type ManagedExecutor, str } from './types.js';
import { EARLIER_NOTE, earlierCreation } from './unconfirmed-twilio.js';

/**
 * SMS and MMS over the Twilio REST protocol (Twilio, or the built-in development carrier when no
 * Twilio credentials are configured). Delivery is confirmed later by the signed status callback.
 */
export function smsExecutor(
  deps: Deps,
  services: { numbers: NumbersService; users: UsersService; repositories: { telephony: TelephonyRepository } },
): ManagedExecutor | null {
  const client = telephonyClient(deps);
  if (!client) return null;
  const { numbers, users } = services;
  const repo = services.repositories.telephony;

  return {
    fromInline: (body) => {
      const sms = body.sms;
      if (!sms || (sms.message === undefined && !sms.mediaUrls?.length)) return null;
      return {
        text: sms.message ?? '',
        ...(sms.mediaUrls?.length ? { mediaUrls: [...sms.mediaUrls] } : {}),
        // Rendered with the rest, so an auto-reply may use merge tags too.
        ...(sms.autoReply?.message ? { autoReply: sms.autoReply.message } : {}),
      };
    },
    preview: (c) => str(c.text) ?? str(c.message) ?? '',
    async deliver(input) {
      const { delivery, message, content, body } = input;
      const to = message.user_number ?? (await users.get(message.account_id, message.env_id, message.user_id))?.number;
      if (!to) throw new DeliveryError('NO_NUMBER', 'the user has no phone number', { retryable: false });
      const text = str(content.text) ?? str(content.message) ?? '';
      const mediaUrls = Array.isArray(content.mediaUrls) ? content.mediaUrls.filter((u): u is string => typeof u === 'string' && u !== '') : [];
      for (const url of mediaUrls) {
        const problem = mediaUrlProblem(url, deps.config.allowPrivateNetworks);
        if (problem) throw new DeliveryError('MEDIA_URL_INVALID', `MMS media URL ${url.slice(0, 200)} ${problem}: media must be public https:// URLs the carrier can fetch`, { retryable: false });
      }
      if (text.trim() === '' && mediaUrls.length === 0) throw new DeliveryError('EMPTY_MESSAGE', 'the SMS has neither text nor media', { retryable: false });

      const from = await numbers.senderFor(message.account_id, body.sms?.from);
      if (!from) {
        throw new DeliveryError('NO_SENDER_NUMBER', 'the account owns no number and CLARION_DEFAULT_SMS_FROM is not set', { retryable: false });
      }
      const earlier = await earlierCreation(deps, client, repo, input, { kind: 'sms', to, from, body: text });
      let sent = earlier;
      try {
        sent ??= await client.sendMessage({
          to,
          from,
          body: text,
          mediaUrls,
          statusCallback: `${publicBase(deps.config)}${CALLBACK_PATHS.smsStatus}`,
        });
      } catch (err) {
        // The carrier keeps an opt-out list of its own (error 21610): honour it here as well.
        if (err instanceof DeliveryError && err.code === 'RECIPIENT_UNSUBSCRIBED') {
          await users.setSuppression(message.account_id, message.env_id, message.user_id, 'SMS', {
            reason: 'Unsubscribed',
            details: { source: 'carrier', providerCode: err.options.providerCode, number: to, trackingId: message.tracking_id },
          });
        }
        throw err;
      }
      const now = deps.clock.now().toISOString();
      await repo.upsertSmsSend({
        delivery_id: delivery.id,
        account_id: message.account_id,
        env_id: message.env_id,
        tracking_id: message.tracking_id,
        user_id: message.user_id,
        to_number: to,
        from_number: from,
        provider_message_id: sent.sid,
        auto_reply: str(content.autoReply) || null,
        replied_at: null,
        reply_message_id: null,
        created_at: now,
      });
      const { encoding, segments } = smsEncoding(text);
      return {
        result: { providerMessageId: sent.sid, response: `${sent.status} ${sent.sid}${earlier ? EARLIER_NOTE : ''}` },
        extra: {
          sms_sent_from: from,
          sms_sent_encoding: encoding,
          sms_sent_segments: mediaUrls.length ? Math.max(1, segments) : segments,
          // An MMS travels as one message whatever its length; an SMS as one part per segment.
          sms_sent_parts: mediaUrls.length ? 1 : segments,
          sms_sent_messageId: sent.sid,
        },
      };
    },
  };
}

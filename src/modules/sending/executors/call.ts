import { CALLBACK_PATHS, publicBase, telephonyClient } from '../../../channels/telephony/endpoint.js';
import { MAX_INLINE_TWIML_CHARS, sayTwiml } from '../../../channels/telephony/twiml.js';
import { DeliveryError } from '../../../channels/types.js';
import type { Deps } from '../../../deps.js';
import type { NumbersService } from '../../telephony/numbers.service.js';
import type { UsersService } from '../../users/users.service.js';
import type { TelephonyRepository } from '../../telephony/telephony.repository.js';
import { type ManagedExecutor, str } from './types.js';
import { EARLIER_NOTE, earlierCreation } from './unconfirmed-twilio.js';

/** Events Clarion asks the carrier to report; `completed` (and busy, no-answer, ...) always come. */
export const CALL_STATUS_EVENTS = ['initiated', 'ringing', 'answered', 'completed'];

/** Automated calls that speak the text (TwiML <Say>), over the Twilio REST protocol. */
export function callExecutor(deps: Deps, services: { numbers: NumbersService; users: UsersService; repositories: { telephony: TelephonyRepository } }): ManagedExecutor | null {
  const client = telephonyClient(deps);
  if (!client) return null;
  const { numbers, users } = services;
  const repo = services.repositories.telephony;

  return {
    fromInline: (body) => (body.call ? { text: body.call.message } : null),
    preview: (c) => str(c.text) ?? str(c.message) ?? '',
    async deliver(input) {
      const { message, content } = input;
      const to = message.user_number ?? (await users.get(message.account_id, message.env_id, message.user_id))?.number;
      if (!to) throw new DeliveryError('NO_NUMBER', 'the user has no phone number', { retryable: false });
      const text = str(content.text) ?? str(content.message) ?? '';
      if (text.trim() === '') throw new DeliveryError('EMPTY_MESSAGE', 'the call has no text to speak', { retryable: false });
      const twiml = sayTwiml(text);
      if (twiml.length > MAX_INLINE_TWIML_CHARS) {
        // Twilio would refuse it (32018) after the call was paid for in a request: said here, in words.
        const reason = `the call's text is ${twiml.length} characters of TwiML once XML-escaped (each & is 5, < and > 4); Twilio takes at most ${MAX_INLINE_TWIML_CHARS}`;
        throw new DeliveryError('CALL_MESSAGE_TOO_LONG', reason, { retryable: false });
      }
      const from = await numbers.defaultNumber(message.account_id);
      if (!from) throw new DeliveryError('NO_SENDER_NUMBER', 'the account owns no number and CLARION_DEFAULT_SMS_FROM is not set', { retryable: false });
      const earlier = await earlierCreation(deps, client, repo, input, { kind: 'call', to, from });
      const call = earlier ?? await client.createCall({
        to,
        from,
        twiml,
        statusCallback: `${publicBase(deps.config)}${CALLBACK_PATHS.callStatus}`,
        statusCallbackEvents: CALL_STATUS_EVENTS,
      });
      return { result: { providerMessageId: call.sid, response: `${call.status} ${call.sid}${earlier ? EARLIER_NOTE : ''}` }, extra: { call_sent_from: from } };
    },
  };
}

import type { TwilioCall, TwilioClient, TwilioMessage } from '../../../channels/telephony/twilio-client.js';
import { type UnconfirmedSend, findUnconfirmedSend } from '../../../channels/telephony/unconfirmed-sends.js';
import type { Deps } from '../../../deps.js';
import type { TelephonyRepository } from '../../telephony/telephony.repository.js';
import type { AttemptRow } from '../sending.tables.js';
import type { DeliverInput } from './types.js';

/**
 * Provider codes of a retried attempt that Twilio refused outright (429, Twilio's 20429): it made
 * nothing, so it needs no lookup. Every other retried attempt may have created the resource: a
 * timeout, a connection lost after the request was written, a 5xx, a 2xx without a resource, an
 * error of ours after Twilio answered (the sms_sends write), or a run that died mid-call
 * (UNRECORDED_RUN, reported by earlierAttempts()).
 */
const REFUSED_CODES = new Set(['429', '20429', 'PROVIDER_RATE_LIMITED']);

/** Added to the attempt's response when its resource is one an earlier attempt created. */
export const EARLIER_NOTE = ' (created at Twilio by an earlier attempt whose answer was lost)';

/** When the first of these attempts whose outcome at Twilio is unknown started; undefined: none. */
export function unconfirmedSince(attempts: AttemptRow[]): Date | undefined {
  const first = attempts.find((a) => a.outcome === 'retry' && !REFUSED_CODES.has(a.provider_code ?? ''));
  return first ? new Date(first.started_at) : undefined;
}

/**
 * Before a retry of an SMS or a call: the Message or Call an earlier attempt created at Twilio
 * without its answer reaching us, to record instead of sending again (unconfirmed-sends.ts has
 * the matching rule). Undefined when there is nothing to look for, Twilio shows none, or the
 * lookup failed: the caller then sends, as it did before lookups existed (a failed lookup may
 * thus still send twice; refusing to send while Twilio's list API is down would not deliver at all).
 */
export async function earlierCreation(
  deps: Pick<Deps, 'logger'>,
  client: TwilioClient,
  repo: TelephonyRepository,
  input: DeliverInput,
  send: Omit<UnconfirmedSend, 'since' | 'recorded'>,
): Promise<TwilioMessage | TwilioCall | undefined> {
  // Not delivery.attempts: a first attempt whose earlier run died has one too (DeliverInput.earlierAttempts).
  if (!input.earlierAttempts) return undefined;
  const since = unconfirmedSince(await input.earlierAttempts());
  if (!since) return undefined;
  const ids = { deliveryId: input.delivery.id, trackingId: input.delivery.tracking_id, channel: send.kind };
  try {
    const found = await findUnconfirmedSend(client, { ...send, since, recorded: (sids) => repo.recordedProviderIds(send.kind, sids) });
    if (found) deps.logger.info({ ...ids, sid: found.sid, status: found.status }, 'Twilio had created what an earlier attempt lost the answer to: recorded instead of sent again');
    return found;
  } catch (err) {
    deps.logger.warn({ ...ids, err }, 'could not look up whether Twilio created what an earlier attempt lost the answer to: sending again');
    return undefined;
  }
}

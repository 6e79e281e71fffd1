import type { TwilioCall, TwilioClient, TwilioMessage } from './twilio-client.js';

/**
 * Finding what an attempt whose answer was lost created at Twilio. Twilio's Messages and Calls
 * endpoints take no idempotency key: a create that timed out, lost its connection after the
 * request was written, or got a 5xx may have made the Message (or Call) all the same. Before
 * sending again, the executor lists the account's resources from the same number to the same
 * number and takes one as the lost attempt's when all of these hold:
 *
 * - `direction` is outbound-api (the REST API made it; not a user's text, not an auto-reply's TwiML);
 * - `to` and `from` are the numbers of this delivery, and for a message `body` is its text;
 * - `date_created` is no earlier than CLOCK_SKEW_MS before the first unconfirmed attempt started
 *   (Twilio stamps whole seconds, and its clock is not ours);
 * - its sid is not a provider id Clarion recorded for a delivery already.
 *
 * When several do, the earliest created is taken. Limits, said in README (Telephony):
 * - Two deliveries with the same text (any two calls) to the same number from the same number
 *   within the window, one of them unconfirmed and the other not yet recorded, cannot be told
 *   apart: the unconfirmed one may take the other's resource, and the user gets one text where
 *   two were sent for.
 * - Only the first page (LIST_PAGE_SIZE, newest first) is read.
 * - A body Twilio rewrote (smart encoding) does not match: that text is sent again, as before.
 */

/** How much earlier than our clock Twilio's date_created may read and still be the attempt's. */
export const CLOCK_SKEW_MS = 30_000;
/** Resources read per lookup: one number texts another rarely more often than this in a retry window. */
export const LIST_PAGE_SIZE = 50;

export interface UnconfirmedSend {
  kind: 'sms' | 'call';
  to: string;
  from: string;
  /** The message's text (SMS only; a call's TwiML is not in its resource). */
  body?: string;
  /** When the first attempt whose outcome is unknown started. */
  since: Date;
  /** Of these sids, the ones Clarion recorded for a delivery already. */
  recorded: (sids: string[]) => Promise<Set<string>>;
}

/** The Message or Call the lost attempt created, or undefined when Twilio shows none. Throws what the list request throws. */
export async function findUnconfirmedSend(client: TwilioClient, send: UnconfirmedSend): Promise<TwilioMessage | TwilioCall | undefined> {
  const query = { to: send.to, from: send.from, pageSize: LIST_PAGE_SIZE };
  const listed: (TwilioMessage | TwilioCall)[] = send.kind === 'sms' ? await client.listMessages(query) : await client.listCalls(query);
  const candidates = matching(listed, send);
  if (candidates.length === 0) return undefined;
  const recorded = await send.recorded(candidates.map((c) => c.resource.sid));
  return candidates.find((c) => !recorded.has(c.resource.sid))?.resource;
}

/** The listed resources that fit the rules above, earliest created first. */
export function matching<T extends TwilioMessage | TwilioCall>(listed: T[], send: Omit<UnconfirmedSend, 'recorded'>): { resource: T; created: number }[] {
  const earliest = send.since.getTime() - CLOCK_SKEW_MS;
  return listed
    .map((resource) => ({ resource, created: Date.parse(resource.date_created ?? '') }))
    .filter(
      ({ resource, created }) =>
        resource.direction === 'outbound-api' &&
        resource.to === send.to &&
        resource.from === send.from &&
        (send.kind !== 'sms' || ((resource as TwilioMessage).body ?? '') === (send.body ?? '')) &&
        Number.isFinite(created) &&
        created >= earliest,
    )
    .sort((a, b) => a.created - b.created);
}

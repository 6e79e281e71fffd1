// A STOP texted from a number holds for that number in the environment of the last send to it,
// not only for the user records that had the number at that moment: a later `POST /sms` to it (a
// new user whose id is the number) and a user created afterwards with it are skipped
// USER_SUPPRESSED, until START. Clarion is configured for Twilio (a loopback peer that records
// every message it is asked to send); the test plays the carrier's signed inbound webhook.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type TwilioPeer, startTwilioPeer, postTwilioCallback, twilioPeerConfig } from '../helpers/twilio-peer.js';
import { eventually } from '../helpers/wait.js';

const FROM = '+14155550100';
type Headers = { authorization: string };

describe.each(STORAGE_KINDS)('SMS opt-out held on the number (%s)', (kind) => {
  let t: TestContext;
  let peer: TwilioPeer;
  let base: string;
  const log = async (headers: Headers, trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers })).json().logs[0] as Record<string, unknown> | undefined;
  /** The send's SMS routing once planned: `SEND` (once the carrier took it) or `SKIP <reason>`. */
  const routed = (headers: Headers, trackingId: string) =>
    eventually(async () => {
      const record = await log(headers, trackingId);
      if (record?.sms_routing === 'SKIP') return `SKIP ${String(record.sms_routing_reason)}`;
      return record?.sms_routing === 'SEND' && record.sms_sent_at !== undefined ? 'SEND' : undefined;
    }, 15_000, 'sms routing');
  const accepted = (res: { statusCode: number; body: string; json: () => unknown }) => {
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { trackingId: string }).trackingId;
  };
  /** `POST /sms` (the SDK's sms.send): the recipient is stored as a user whose id is the number. */
  const smsTo = async (number: string, headers: Headers = t.auth) =>
    routed(headers, accepted(await t.app.inject({ method: 'POST', url: '/sms', headers, payload: { type: 'promo', to: number, message: 'sale' } })));
  /** `POST /send` to a user (created or updated by the send when `number` is given). */
  const sendTo = async (user: { id: string; number?: string }, headers: Headers = t.auth, sms: Record<string, unknown> = { message: 'hello' }) =>
    routed(headers, accepted(await t.app.inject({ method: 'POST', url: '/send', headers, payload: { type: 'promo', to: user, sms } })));
  let sid = 0;
  /** The carrier's signed inbound webhook over real HTTP; answered once Clarion is done with the text. */
  const inbound = async (from: string, body: string, extra: Record<string, string> = {}) => {
    const form = { MessageSid: `SMopt${++sid}`, SmsSid: `SMopt${sid}`, AccountSid: peer.accountSid, From: from, To: FROM, Body: body, ...extra };
    const res = await postTwilioCallback(`${base}/telephony/twilio/inbound`, form, peer.authToken);
    expect([res.status, await res.text()]).toEqual([200, expect.stringContaining('<Response/>')]);
  };
  /** Bodies of the messages the peer was asked to send to `to`. */
  const sentTo = (to: string) => peer.requests.filter((r) => r.resource === 'Messages' && r.method === 'POST' && r.params.To === to).map((r) => r.params.Body);

  beforeAll(async () => {
    peer = await startTwilioPeer();
    t = await createTestContext(kind, {
      workers: true,
      config: twilioPeerConfig(peer, FROM),
    });
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
    t.deps.config.publicUrl = base;
  });
  afterAll(async () => {
    await t?.close();
    await peer?.close();
  });

  it('after STOP, POST /sms to the number and a user created afterwards with it are skipped; after START both are sent', async () => {
    const number = '+14155556201';
    expect(await sendTo({ id: 'fstop', number })).toBe('SEND');
    await inbound(number, 'STOP');

    expect(await sendTo({ id: 'fstop' })).toBe('SKIP USER_SUPPRESSED');
    expect(await smsTo(number)).toBe('SKIP USER_SUPPRESSED');
    expect(await sendTo({ id: 'fstop-later', number })).toBe('SKIP USER_SUPPRESSED');
    expect(sentTo(number)).toEqual(['hello']);

    await inbound(number, 'start');
    expect(await smsTo(number)).toBe('SEND');
    expect(await sendTo({ id: 'fstop-later' })).toBe('SEND');
    expect(await sendTo({ id: 'fstop' })).toBe('SEND');
    expect(sentTo(number)).toEqual(['hello', 'sale', 'hello', 'hello']);
  });

  it.each([
    ['REVOKE', '+14155556202'],
    ['OptOut!', '+14155556203'],
  ])('%s acts as STOP', async (keyword, number) => {
    expect(await sendTo({ id: `kw-${number}`, number })).toBe('SEND');
    await inbound(number, keyword);
    expect(await sendTo({ id: `kw-${number}` })).toBe('SKIP USER_SUPPRESSED');
    expect(await smsTo(number)).toBe('SKIP USER_SUPPRESSED');
  });

  it("Twilio's OptOutType decides over the body; without it, a body that is not a keyword is an ordinary text", async () => {
    const typed = '+14155556204';
    expect(await sendTo({ id: 'typed', number: typed })).toBe('SEND');
    // A custom or other-language keyword Advanced Opt-Out recognised.
    await inbound(typed, 'Arrêt', { OptOutType: 'STOP' });
    expect(await smsTo(typed)).toBe('SKIP USER_SUPPRESSED');
    expect(await sendTo({ id: 'typed' })).toBe('SKIP USER_SUPPRESSED');
    await inbound(typed, 'Oui', { OptOutType: 'START' });
    expect(await smsTo(typed)).toBe('SEND');

    // As before: "stop please" is no keyword, so it is recorded, gets the auto-reply and stops nothing.
    const chatty = '+14155556205';
    expect(await sendTo({ id: 'chatty', number: chatty }, t.auth, { message: 'how was it?', autoReply: { message: 'AUTO' } })).toBe('SEND');
    await inbound(chatty, 'stop please');
    expect(sentTo(chatty)).toEqual(['how was it?', 'AUTO']);
    expect(await smsTo(chatty)).toBe('SEND');
    expect(await sendTo({ id: 'chatty-later', number: chatty })).toBe('SEND');

    // HELP is answered by the carrier: no auto-reply, no opt-out; the next ordinary text gets the reply.
    const helpless = '+14155556207';
    expect(await sendTo({ id: 'helpless', number: helpless }, t.auth, { message: 'how was it?', autoReply: { message: 'AUTO' } })).toBe('SEND');
    await inbound(helpless, 'Help');
    expect(sentTo(helpless)).toEqual(['how was it?']);
    await inbound(helpless, 'fine');
    expect(sentTo(helpless)).toEqual(['how was it?', 'AUTO']);
    expect(await smsTo(helpless)).toBe('SEND');
  });

  it('another environment of the account and another account are not affected', async () => {
    const number = '+14155556206';
    const second = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Second' } })).json<{ clientId: string }>();
    const secondKey = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'second', environmentId: second.clientId } })).json<{ key: string }>();
    const asSecond = { authorization: `Bearer ${secondKey.key}` };
    const asOther = { authorization: `Bearer ${(await t.newAccount('Neighbour')).apiKey}` };

    expect(await sendTo({ id: 'scoped', number })).toBe('SEND');
    await inbound(number, 'STOP');
    expect(await smsTo(number)).toBe('SKIP USER_SUPPRESSED');
    expect(await smsTo(number, asSecond)).toBe('SEND');
    expect(await sendTo({ id: 'scoped', number }, asSecond)).toBe('SEND');
    expect(await smsTo(number, asOther)).toBe('SEND');
    expect(await sendTo({ id: 'scoped', number }, asOther)).toBe('SEND');
  });
});

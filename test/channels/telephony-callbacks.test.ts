import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twilioSignature } from '../../src/channels/telephony/signature.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type TwilioPeer, startTwilioPeer, postTwilioCallback, twilioPeerConfig } from '../helpers/twilio-peer.js';
import { eventually } from '../helpers/wait.js';

/** Clarion configured for Twilio (a loopback Twilio peer): the test plays Twilio's callbacks itself. */
describe.each(STORAGE_KINDS)('telephony with Twilio configured: REST, retries and signed callbacks (%s)', (kind) => {
  let t: TestContext;
  let peer: TwilioPeer;
  let base: string;
  const FROM = '+14155550100';
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] !== undefined ? log(trackingId) : undefined), 15_000, field);
  const send = async (payload: unknown) => (await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object })).json().trackingId as string;
  /** POSTs a form to a callback route over real HTTP, signed with `token` (or not at all). */
  const callback = (path: string, params: Record<string, string>, token: string | null) => postTwilioCallback(`${base}${path}`, params, token);
  const events = () => t.deps.db.selectFrom('provider_events' as never).selectAll().execute();

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
    await t.close();
    await peer.close();
  });

  it('sends through the configured API with the callback URL, and applies only correctly signed status callbacks', async () => {
    const trackingId = await send({ type: 'otp', to: { id: 'ada', number: '+14155550123' }, sms: { message: 'Code 1234' } });
    const [created] = await peer.waitForCreated(1);
    expect(created.params).toEqual({ To: '+14155550123', From: FROM, Body: 'Code 1234', StatusCallback: `${base}/telephony/twilio/sms-status` });
    const sent = await settled(trackingId, 'sms_sent_at');
    const sid = sent.sms_sent_messageId as string;
    expect(sid).toMatch(/^SM/);
    peer.resources.get(sid)!.price = '-0.00790';

    const params = { MessageSid: sid, SmsSid: sid, MessageStatus: 'delivered', SmsStatus: 'delivered', AccountSid: peer.accountSid, From: FROM, To: '+14155550123' };
    const missing = await callback('/telephony/twilio/sms-status', params, null);
    expect(missing.status).toBe(401);
    expect((await missing.json()).error.code).toBe('UNAUTHORIZED');
    const wrong = await callback('/telephony/twilio/sms-status', params, 'not-the-auth-token');
    expect(wrong.status).toBe(403);
    expect((await wrong.json()).error.code).toBe('FORBIDDEN');
    // A signature over other parameters (a replayed signature on a changed body) fails as well.
    const tampered = await fetch(`${base}/telephony/twilio/sms-status`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(peer.authToken, `${base}/telephony/twilio/sms-status`, { ...params, MessageStatus: 'sent' }) },
      body: new URLSearchParams(params).toString(),
    });
    expect(tampered.status).toBe(403);
    const unchanged = await log(trackingId);
    expect(unchanged.sms_delivered_at).toBeUndefined();
    expect(await events()).toHaveLength(0);

    const right = await callback('/telephony/twilio/sms-status', params, peer.authToken);
    expect(right.status).toBe(204);
    const delivered = await log(trackingId);
    expect(delivered).toMatchObject({ sms_delivered_at: expect.any(String), sms_delivered_cost_internal: 0.0079 });
  });

  it('maps undelivered and failed reports to readable codes', async () => {
    const trackingId = await send({ type: 'otp', to: { id: 'bob', number: '+14155550124' }, sms: { message: 'hi' } });
    const sid = (await settled(trackingId, 'sms_sent_messageId')).sms_sent_messageId as string;
    const res = await callback('/telephony/twilio/sms-status', { MessageSid: sid, MessageStatus: 'undelivered', ErrorCode: '30007', AccountSid: peer.accountSid }, peer.authToken);
    expect(res.status).toBe(204);
    expect(await log(trackingId)).toMatchObject({ sms_failed_code: 'CARRIER_FILTERED', sms_failed_internal: expect.stringContaining('30007') });
  });

  it('applies a completed call with its duration and the price of the Call resource', async () => {
    // Reported as soon as the peer has the call: possibly before the worker committed its sid.
    const before = peer.requests.length;
    const trackingId = await send({ type: 'alert', to: { id: 'carol', number: '+14155550125' }, call: { message: 'Wake up' } });
    const created = await eventually(() => peer.requests.slice(before).find((r) => r.resource === 'Calls' && r.method === 'POST'), 10_000, 'call creation');
    expect(created.params).toMatchObject({ Twiml: '<Response><Say>Wake up</Say></Response>', StatusCallback: `${base}/telephony/twilio/call-status`, StatusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'] });
    const sid = [...peer.resources.keys()].find((s) => s.startsWith('CA'))!;
    peer.resources.get(sid)!.price = '-0.02800';
    peer.resources.get(sid)!.duration = '75';
    const res = await callback('/telephony/twilio/call-status', { CallSid: sid, CallStatus: 'completed', CallDuration: '75', AccountSid: peer.accountSid }, peer.authToken);
    expect(res.status).toBe(204);
    const record = await settled(trackingId, 'call_delivered_at');
    expect(record).toMatchObject({ call_delivered_code: 'COMPLETED', call_delivered_duration: 75, call_delivered_cost: 0.028, call_delivered_cost_internal: 0.028, call_sent_from: FROM });
  });

  it('retries 429 and 5xx answers with backoff and records every attempt', async () => {
    peer.failNext({ status: 503, body: { code: 20500, message: 'Internal Server Error', status: 503 } }, { status: 429, body: { code: 20429, message: 'Too Many Requests', status: 429 }, headers: { 'retry-after': '0' } });
    const trackingId = await send({ type: 'otp', to: { id: 'dave', number: '+14155550126' }, sms: { message: 'retry me' } });
    const record = await settled(trackingId, 'sms_sent_at');
    expect(record.sms_sent_messageId).toMatch(/^SM/);
    const attempts = await (t.deps.db as unknown as Kysely<SendingTables>)
      .selectFrom('delivery_attempts as a')
      .innerJoin('deliveries as d', 'd.id', 'a.delivery_id')
      .select(['a.outcome as outcome', 'a.provider_code as provider_code'])
      .where('d.tracking_id', '=', trackingId)
      .orderBy('a.attempt')
      .execute();
    expect(attempts).toEqual([
      { outcome: 'retry', provider_code: '20500' },
      { outcome: 'retry', provider_code: '20429' },
      { outcome: 'success', provider_code: null },
    ]);
  });

  it('fails permanently on a Twilio 4xx without retrying', async () => {
    peer.failNext({ status: 400, body: { code: 21614, message: "'To' number is not a valid mobile number", status: 400 } });
    const trackingId = await send({ type: 'otp', to: { id: 'erin', number: '+14155550127' }, sms: { message: 'hi' } });
    const record = await settled(trackingId, 'sms_failed_at');
    expect(record.sms_failed_code).toBe('NOT_A_MOBILE_NUMBER');
    expect(record.sms_failed_internal).toContain('21614');
  });

  it("puts a carrier's text to the shared number on the last send to that user from it, whatever Clarion* parameters it carries", async () => {
    const trackingId = await send({ type: 'otp', to: { id: 'frank', number: '+14155550128' }, sms: { message: 'hi' } });
    expect((await settled(trackingId, 'sms_sent_at')).sms_sent_from).toBe(FROM);
    // Only the development carrier's simulated texts name an account and environment; with Twilio they are ignored.
    const params = { MessageSid: 'SMshared', From: '+14155550128', To: FROM, Body: 'hello back', AccountSid: peer.accountSid, ClarionAccountId: 'another-account', ClarionEnvironmentId: 'another-env' };
    expect((await callback('/telephony/twilio/inbound', params, peer.authToken)).status).toBe(200);
    expect(await log(trackingId)).toMatchObject({ sms_inbound_text: 'hello back', sms_inbound_from: '+14155550128' });
  });

  it('verifies the inbound webhook and registers only numbers of the Twilio account', async () => {
    const params = { MessageSid: 'SMinbound', From: '+14155550123', To: FROM, Body: 'STOP', AccountSid: peer.accountSid };
    expect((await callback('/telephony/twilio/inbound', params, 'wrong')).status).toBe(403);
    const user = await t.app.inject({ method: 'GET', url: '/users/ada', headers: t.auth });
    expect(user.statusCode).toBe(200);
    const stillSendable = await send({ type: 'otp', to: { id: 'ada' }, sms: { message: 'still here' } });
    expect((await settled(stillSendable, 'sms_routing')).sms_routing).toBe('SEND');

    const ok = await callback('/telephony/twilio/inbound', params, peer.authToken);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('<Response/>');
    const stopped = await send({ type: 'otp', to: { id: 'ada' }, sms: { message: 'gone' } });
    expect((await settled(stopped, 'sms_routing')).sms_routing_reason).toBe('USER_SUPPRESSED');

    const refused = await t.app.inject({ method: 'POST', url: '/numbers/order', headers: t.auth, payload: { phoneNumber: '+14155550177' } });
    expect(refused.statusCode).toBe(400);
    peer.ownedNumbers.add('+14155550177');
    const registered = await t.app.inject({ method: 'POST', url: '/numbers/order', headers: t.auth, payload: { phoneNumber: '+14155550177' } });
    expect(registered.json()).toMatchObject({ status: 'completed', phoneNumber: '+14155550177' });
    const list = (await t.app.inject({ method: 'GET', url: '/numbers/list', headers: t.auth })).json();
    expect(list).toEqual({ sharedNumber: FROM, numbers: [expect.objectContaining({ phoneNumber: '+14155550177' })] });
    // With a number of its own, the account's texts go from it; one naming the shared number goes from that.
    const own = await send({ type: 'otp', to: { id: 'grace', number: '+14155550124' }, sms: { message: 'own' } });
    expect((await settled(own, 'sms_sent_at')).sms_sent_from).toBe('+14155550177');
    const shared = await send({ type: 'otp', to: { id: 'grace' }, sms: { message: 'shared', from: FROM } });
    expect((await settled(shared, 'sms_sent_at')).sms_sent_from).toBe(FROM);
    expect(peer.requests.filter((r) => r.resource === 'Messages' && r.method === 'POST' && r.params.Body === 'shared').map((r) => r.params.From)).toEqual([FROM]);
    // No development carrier when Twilio is configured.
    expect((await t.app.inject({ method: 'GET', url: '/dev-carrier/messages', headers: t.auth })).statusCode).toBe(404);
  });
});

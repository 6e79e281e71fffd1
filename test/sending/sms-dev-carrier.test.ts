import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devCarrierCredentials } from '../../src/channels/telephony/endpoint.js';
import { TwilioClient } from '../../src/channels/telephony/twilio-client.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('SMS end to end through the local development carrier (%s)', (kind) => {
  let t: TestContext;
  let from: string;
  const send = (payload: unknown) => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] !== undefined ? log(trackingId) : undefined), 15_000, field);
  const sent = async (payload: unknown) => {
    const res = await send(payload);
    expect(res.statusCode).toBe(200);
    return res.json().trackingId as string;
  };
  const carrierMessages = async (to?: string) =>
    (await t.app.inject({ method: 'GET', url: `/dev-carrier/messages${to ? `?to=${encodeURIComponent(to)}` : ''}`, headers: t.auth })).json().messages as Record<string, unknown>[];
  const inbound = (payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/dev-carrier/inbound', headers: t.auth, payload });

  beforeAll(async () => {
    // Default configuration: no TWILIO_* credentials, so the built-in carrier is on.
    t = await createTestContext(kind, { workers: true });
    // The carrier and Clarion talk over real HTTP: give the address Clarion listens on.
    t.deps.config.publicUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const numbers = (await t.app.inject({ method: 'GET', url: '/numbers/list', headers: t.auth })).json();
    from = numbers.numbers[0].phoneNumber;
  });
  afterAll(() => t.close());

  it('gives the account a development number, listed in the SDK shape', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/numbers/list', headers: t.auth });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.numbers).toHaveLength(1);
    expect(body.numbers[0]).toMatchObject({ phoneNumber: expect.stringMatching(/^\+1\d{3}55501\d{2}$/), countryCode: 'US', numberType: 'local', billingStatus: 'active', monthlyPrice: 0 });
    expect(body.numbers[0].nextBillingDate).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(body.sharedNumber).toBe(from);
    const other = await t.newAccount();
    const theirs = (await t.app.inject({ method: 'GET', url: '/numbers/list', headers: { authorization: `Bearer ${other.apiKey}` } })).json();
    expect(theirs.numbers[0].phoneNumber).not.toBe(from);
  });

  it('is readable and sendable through the pingram SDK (NumbersApi.list, send)', async () => {
    const client = new Pingram({ apiKey: t.account.apiKey, baseUrl: t.deps.config.publicUrl! });
    const listed = await client.numbers.list();
    expect(listed.sharedNumber).toBe(from);
    expect(listed.numbers.map((n) => [n.phoneNumber, n.billingStatus, n.createdAt.length > 0])).toEqual([[from, 'active', true]]);
    const { trackingId } = await client.send({ type: 'sdk_sms', to: { id: 'sdk-sms', number: '+14155550129' }, sms: { message: 'Hi from the SDK' } });
    expect(await settled(trackingId, 'sms_delivered_at')).toMatchObject({ sms_sent_from: from, sms_preview: 'Hi from the SDK' });
  });

  it('sends an SMS, logs sms_sent_* and then sms_delivered_* from the signed callbacks', async () => {
    const trackingId = await sent({ type: 'otp', to: { id: 'ada', number: '+14155550123' }, parameters: { code: '4711' }, sms: { message: 'Your code is {{ code }}' } });
    const record = await settled(trackingId, 'sms_delivered_at');
    expect(record).toMatchObject({
      sms_routing: 'SEND',
      sms_preview: 'Your code is 4711',
      sms_sent_from: from,
      sms_sent_encoding: 'GSM-7',
      sms_sent_segments: 1,
      sms_sent_parts: 1,
      sms_sent_messageId: expect.stringMatching(/^SM[0-9a-f]{32}$/),
      sms_delivered_cost_internal: 0.0079,
      user_number: '+14155550123',
    });
    expect(record.sms_delivered_after).toBeGreaterThanOrEqual(record.sms_sent_after);
    const [carried] = await carrierMessages('+14155550123');
    expect(carried).toMatchObject({ sid: record.sms_sent_messageId, direction: 'outbound', from, to: '+14155550123', body: 'Your code is 4711', status: 'delivered', trackingId });
  });

  it('reports UCS-2 and multi-segment texts', async () => {
    const emoji = await sent({ type: 'otp', to: { id: 'emo', number: '+14155550124' }, sms: { message: 'Party time 🎉' } });
    expect(await settled(emoji, 'sms_sent_at')).toMatchObject({ sms_sent_encoding: 'UCS-2', sms_sent_segments: 1, sms_sent_parts: 1 });
    const long = await sent({ type: 'otp', to: { id: 'emo' }, sms: { message: '🎉'.repeat(40) } });
    expect(await settled(long, 'sms_sent_at')).toMatchObject({ sms_sent_encoding: 'UCS-2', sms_sent_segments: 2, sms_sent_parts: 2 });
    const gsm = await sent({ type: 'otp', to: { id: 'emo' }, sms: { message: 'x'.repeat(200) } });
    expect(await settled(gsm, 'sms_sent_at')).toMatchObject({ sms_sent_encoding: 'GSM-7', sms_sent_segments: 2 });
  });

  it('sends MMS media and refuses media that is not public https', async () => {
    const mms = await sent({ type: 'pic', to: { id: 'pic', number: '+14155550125' }, sms: { message: 'Look', mediaUrls: ['https://cdn.example.com/cat.png'] } });
    const record = await settled(mms, 'sms_delivered_at');
    expect(record).toMatchObject({ sms_sent_parts: 1, sms_delivered_cost_internal: 0.02 });
    const [carried] = await carrierMessages('+14155550125');
    expect(carried.mediaUrls).toEqual(['https://cdn.example.com/cat.png']);

    const bad = await sent({ type: 'pic', to: { id: 'pic' }, sms: { message: 'Look', mediaUrls: ['http://127.0.0.1/secret.png'] } });
    const failed = await settled(bad, 'sms_failed_at');
    expect(failed.sms_failed_code).toBe('MEDIA_URL_INVALID');
    expect(failed.sms_failed_internal).toContain('https');
    expect(await carrierMessages('+14155550125')).toHaveLength(1);
  });

  it('maps carrier failures to readable codes', async () => {
    const undelivered = await sent({ type: 'otp', to: { id: 'unreachable', number: '+15005550006' }, sms: { message: 'hi' } });
    expect(await settled(undelivered, 'sms_failed_at')).toMatchObject({ sms_failed_code: 'UNREACHABLE', sms_sent_messageId: expect.stringMatching(/^SM/) });
    const failed = await sent({ type: 'otp', to: { id: 'carrier-failed', number: '+15005550007' }, sms: { message: 'hi' } });
    expect((await settled(failed, 'sms_failed_at')).sms_failed_code).toBe('UNKNOWN_ERROR');
    const invalid = await sent({ type: 'otp', to: { id: 'invalid', number: '+15005550001' }, sms: { message: 'hi' } });
    const rejected = await settled(invalid, 'sms_failed_at');
    expect(rejected.sms_failed_code).toBe('INVALID_TO_NUMBER');
    expect(rejected.sms_sent_at).toBeUndefined();
    // The carrier's own opt-out list: permanent, and the user is suppressed for SMS.
    const optedOut = await sent({ type: 'otp', to: { id: 'opted-out', number: '+15005550004' }, sms: { message: 'hi' } });
    expect((await settled(optedOut, 'sms_failed_at')).sms_failed_code).toBe('RECIPIENT_UNSUBSCRIBED');
    const next = await sent({ type: 'otp', to: { id: 'opted-out' }, sms: { message: 'again' } });
    expect(await settled(next, 'sms_routing')).toMatchObject({ sms_routing: 'SKIP', sms_routing_reason: 'USER_SUPPRESSED' });
  });

  it('sends from an owned number named in sms.from; refuses one the account does not own', async () => {
    const own = await t.app.inject({ method: 'POST', url: '/numbers/order', headers: t.auth, payload: { phoneNumber: '+1 (415) 555-0999' } });
    expect(own.json()).toMatchObject({ status: 'completed', phoneNumber: '+14155550999' });
    const other = await t.newAccount('Number thief');
    const taken = await t.app.inject({ method: 'POST', url: '/numbers/order', headers: { authorization: `Bearer ${other.apiKey}` }, payload: { phoneNumber: '+14155550999' } });
    expect(taken.statusCode).toBe(409);

    const chosen = await sent({ type: 'otp', to: { id: 'from-test', number: '+14155550126' }, sms: { message: 'hi', from: '+14155550999' } });
    expect((await settled(chosen, 'sms_delivered_at')).sms_sent_from).toBe('+14155550999');
    const unnamed = await sent({ type: 'otp', to: { id: 'from-test' }, sms: { message: 'hi' } });
    expect((await settled(unnamed, 'sms_sent_at')).sms_sent_from).toBe(from);
    // The spec: sms.from must be a number of the account. Another's, an unknown one or no number at all is refused, and nothing is sent.
    const carried = (await carrierMessages()).length;
    for (const [named, message, fix] of [
      ['+14155550888', 'sms.from +14155550888 is not a number of this account.', 'GET /numbers/list'],
      ['(415) 555-0888', 'sms.from +14155550888 is not a number of this account.', 'GET /numbers/list'],
      ['garbage', 'sms.from is not a valid phone number.', 'E.164'],
    ]) {
      const refused = await send({ type: 'otp', to: { id: 'from-test' }, sms: { message: 'hi', from: named } });
      expect(refused.statusCode, named).toBe(400);
      expect(refused.json().error).toMatchObject({ code: 'VALIDATION_FAILED', message, fix: expect.stringContaining(fix) });
    }
    const stolen = await t.app.inject({ method: 'POST', url: '/send', headers: { authorization: `Bearer ${other.apiKey}` }, payload: { type: 'otp', to: { id: 'x', number: '+14155550126' }, sms: { message: 'hi', from: '+14155550999' } } });
    expect(stolen.statusCode).toBe(400);
    expect((await carrierMessages()).length).toBe(carried);
    expect((await t.app.inject({ method: 'GET', url: '/numbers/list', headers: t.auth })).json().numbers.map((n: { phoneNumber: string }) => n.phoneNumber)).toEqual([from, '+14155550999']);
  });

  it('records an inbound reply, and STOP suppresses SMS until START', async () => {
    const user = { id: 'stopper', number: '+14155550127' };
    const first = await sent({ type: 'promo', to: user, sms: { message: 'Sale today' } });
    await settled(first, 'sms_delivered_at');

    const stop = await inbound({ from: user.number, text: 'STOP' });
    expect(stop.statusCode).toBe(200);
    expect(stop.json()).toMatchObject({ to: from, webhook: { status: 200, body: expect.stringContaining('<Response/>') } });
    expect(await log(first)).toMatchObject({ sms_inbound_from: user.number, sms_inbound_text: 'STOP', sms_inbound_at: expect.any(String) });

    const suppressed = await sent({ type: 'promo', to: { id: user.id }, sms: { message: 'Another sale' } });
    expect(await settled(suppressed, 'sms_routing')).toMatchObject({ sms_routing: 'SKIP', sms_routing_reason: 'USER_SUPPRESSED' });

    await inbound({ from: user.number, text: 'start' });
    const restored = await sent({ type: 'promo', to: { id: user.id }, sms: { message: 'Welcome back' } });
    expect(await settled(restored, 'sms_delivered_at')).toMatchObject({ sms_routing: 'SEND' });
  });

  it('applies a STOP only in the environment of the last send to that number, whoever simulates it', async () => {
    const number = '+14155550133';
    const second = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Second' } })).json();
    const secondKey = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'second', environmentId: second.clientId } })).json();
    const asSecond = { authorization: `Bearer ${secondKey.key}` };
    // The same person is a user of both environments; only the first has sent them anything.
    expect((await t.app.inject({ method: 'POST', url: '/users/twin', headers: asSecond, payload: { id: 'twin', number } })).statusCode).toBe(200);
    await settled(await sent({ type: 'promo', to: { id: 'twin', number }, sms: { message: 'Sale' } }), 'sms_delivered_at');

    // The second environment's key simulates the STOP (the carrier is the account's).
    const stop = await t.app.inject({ method: 'POST', url: '/dev-carrier/inbound', headers: asSecond, payload: { from: number, text: 'STOP' } });
    expect(stop.json().webhook.status).toBe(200);
    const routing = async (headers: Record<string, string>) => {
      const res = await t.app.inject({ method: 'POST', url: '/send', headers, payload: { type: 'promo', to: { id: 'twin' }, sms: { message: 'Hi' } } });
      const trackingId = res.json().trackingId;
      return eventually(async () => {
        const rec = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers })).json().logs[0];
        return rec?.sms_routing ? `${rec.sms_routing} ${rec.sms_routing_reason ?? ''}`.trim() : undefined;
      }, 15_000, 'routing');
    };
    expect(await routing(t.auth)).toBe('SKIP USER_SUPPRESSED');
    expect(await routing(asSecond)).toBe('SEND');
  });

  it('answers an inbound message once with the auto-reply of the last send', async () => {
    const user = { id: 'replier', number: '+14155550128' };
    const trackingId = await sent({ type: 'survey', to: user, parameters: { name: 'Ada' }, sms: { message: 'How was it?', autoReply: { message: 'Thanks {{ name }} 🙏' } } });
    await settled(trackingId, 'sms_delivered_at');

    expect((await inbound({ from: user.number, text: 'Great' })).json().webhook.status).toBe(200);
    const record = await log(trackingId);
    expect(record).toMatchObject({
      sms_inbound_text: 'Great',
      sms_replied_to: user.number,
      sms_replied_text: 'Thanks Ada 🙏',
      sms_replied_segments: 1,
      sms_replied_encoding: 'UCS-2',
      sms_replied_at: expect.any(String),
    });
    await inbound({ from: user.number, text: 'Really great' });
    expect((await log(trackingId)).sms_inbound_text).toBe('Really great');
    const toUser = await carrierMessages(user.number);
    expect(toUser.filter((m) => m.direction === 'outbound' && m.body === 'Thanks Ada 🙏')).toHaveLength(1);
    expect(toUser.filter((m) => m.direction === 'outbound').map((m) => m.from)).toEqual([from, from]);
    const fromUser = (await carrierMessages()).filter((m) => m.direction === 'inbound' && m.from === user.number);
    expect(fromUser.map((m) => [m.to, m.body])).toEqual([
      [from, 'Really great'],
      [from, 'Great'],
    ]);
  });

  it("lists messages over its REST API as Twilio does (To, From, DateSent filters, the page's messages)", async () => {
    const to = '+14155550177';
    const trackingId = await sent({ type: 'otp', to: { id: 'lister', number: to }, sms: { message: 'Listed' } });
    const { sms_sent_messageId: sid } = await settled(trackingId, 'sms_delivered_at');
    const client = new TwilioClient({ ...devCarrierCredentials(t.deps.secrets), baseUrl: `${t.deps.config.publicUrl}/dev-carrier` });
    const listed = await client.listMessages({ to, from, pageSize: 10 });
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ sid, to, from, body: 'Listed', direction: 'outbound-api', status: 'delivered' });
    expect(Date.parse(listed[0].date_created!)).not.toBeNaN();
    expect(await client.listMessages({ to, from: '+14155550999', pageSize: 10 })).toEqual([]);

    const { accountSid, authToken } = devCarrierCredentials(t.deps.secrets);
    const page = async (query: string) => {
      const res = await t.app.inject({ method: 'GET', url: `/dev-carrier/2010-04-01/Accounts/${accountSid}/Messages.json?${query}`, headers: { authorization: `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}` } });
      expect(res.statusCode, res.body).toBe(200);
      return res.json<{ messages: { sid: string }[]; page_size: number; next_page_uri: null }>();
    };
    const today = new Date(Date.parse(listed[0].date_created!)).toISOString().slice(0, 10);
    // `DateSent>=day` in a URL is the parameter `DateSent>` with the value `day`, as Twilio reads it.
    expect((await page(`To=${encodeURIComponent(to)}&DateSent>=${today}`)).messages.map((m) => m.sid)).toEqual([sid]);
    expect((await page(`To=${encodeURIComponent(to)}&DateSent%3C=2001-01-01`)).messages).toEqual([]);
    expect(await page(`To=${encodeURIComponent(to)}&PageSize=5`)).toMatchObject({ page_size: 5, next_page_uri: null, messages: [{ sid }] });
  });

  it('keeps the carrier list per environment and refuses unsigned use of its REST API', async () => {
    const other = await t.newAccount('Neighbour');
    const theirs = (await t.app.inject({ method: 'GET', url: '/dev-carrier/messages', headers: { authorization: `Bearer ${other.apiKey}` } })).json();
    expect(theirs.messages).toEqual([]);
    const anonymous = await t.app.inject({
      method: 'POST',
      url: '/dev-carrier/2010-04-01/Accounts/ACdeadbeef/Messages.json',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'To=%2B14155550123&From=%2B14155550100&Body=hi',
    });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json()).toMatchObject({ code: 20003 });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devCarrierCredentials } from '../../src/channels/telephony/endpoint.js';
import { TwilioClient } from '../../src/channels/telephony/twilio-client.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('calls end to end through the local development carrier (%s)', (kind) => {
  let t: TestContext;
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] !== undefined ? log(trackingId) : undefined), 15_000, field);
  const call = async (to: Record<string, unknown>, message: string) => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'alert', to, call: { message } } });
    expect(res.statusCode).toBe(200);
    return res.json().trackingId as string;
  };

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
    t.deps.config.publicUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => t.close());

  it('places a call that speaks the text, and logs call_delivered_* with duration and cost', async () => {
    const from = (await t.app.inject({ method: 'GET', url: '/numbers/list', headers: t.auth })).json().numbers[0].phoneNumber;
    const trackingId = await call({ id: 'oncall', number: '+14155550140' }, 'The server <db-1> is down & needs you');
    const record = await settled(trackingId, 'call_delivered_at');
    expect(record).toMatchObject({
      call_routing: 'SEND',
      call_preview: 'The server <db-1> is down & needs you',
      call_sent_from: from,
      call_delivered_code: 'COMPLETED',
      // 8 words at 2.5 words a second; one started minute at $0.014.
      call_delivered_duration: 4,
      call_delivered_cost: 0.014,
      call_delivered_cost_internal: 0.014,
    });
    expect(record.call_delivered_after).toBeGreaterThanOrEqual(record.call_sent_after);
    const calls = (await t.app.inject({ method: 'GET', url: '/dev-carrier/calls', headers: t.auth })).json().calls;
    expect(calls[0]).toMatchObject({ from, to: '+14155550140', status: 'completed', spokenText: 'The server <db-1> is down & needs you', durationSeconds: 4, price: 0.014, trackingId });
  });

  it('lists calls over its REST API as Twilio does (To, From, StartTime filters, the page\'s calls)', async () => {
    const from = (await t.app.inject({ method: 'GET', url: '/numbers/list', headers: t.auth })).json().numbers[0].phoneNumber;
    const to = '+14155550141';
    const record = await settled(await call({ id: 'listed-callee', number: to }, 'Listed'), 'call_delivered_at');
    const client = new TwilioClient({ ...devCarrierCredentials(t.deps.secrets), baseUrl: `${t.deps.config.publicUrl}/dev-carrier` });
    const listed = await client.listCalls({ to, from, pageSize: 10 });
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ to, from, direction: 'outbound-api', status: 'completed' });
    expect(record.call_attempts[0].response).toContain(listed[0].sid);

    const { accountSid, authToken } = devCarrierCredentials(t.deps.secrets);
    const calls = async (query: string) => {
      const res = await t.app.inject({ method: 'GET', url: `/dev-carrier/2010-04-01/Accounts/${accountSid}/Calls.json?${query}`, headers: { authorization: `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}` } });
      expect(res.statusCode, res.body).toBe(200);
      return res.json<{ calls: { sid: string }[] }>().calls.map((c) => c.sid);
    };
    const day = new Date(Date.parse(listed[0].date_created!)).toISOString().slice(0, 10);
    expect(await calls(`To=${encodeURIComponent(to)}&StartTime>=${day}`)).toEqual([listed[0].sid]);
    expect(await calls(`To=${encodeURIComponent(to)}&StartTime<=2001-01-01`)).toEqual([]);
  });

  it.each([
    ['+15005550008', 'BUSY'],
    ['+15005550006', 'NO_ANSWER'],
    ['+15005550007', 'FAILED'],
    ['+15005550005', 'CANCELED'],
  ])('a call to %s that does not connect fails with %s', async (number, code) => {
    const trackingId = await call({ id: `callee-${code}`, number }, 'Hello');
    const record = await settled(trackingId, 'call_failed_at');
    expect(record.call_failed_code).toBe(code);
    expect(record.call_sent_at).toBeDefined();
    expect(record.call_delivered_at).toBeUndefined();
  });

  it('fails a text longer than Twilio takes as inline TwiML (4,000 characters once escaped) without placing the call', async () => {
    // 3,000 characters, 3,600 once the ampersands are escaped, plus the <Response><Say> around them.
    const fits = await call({ id: 'long-ok', number: '+14155550141' }, `${'a'.repeat(3_000)}`);
    const tooLong = await call({ id: 'long-no', number: '+14155550142' }, `${'a & b '.repeat(500)}`);
    expect((await settled(fits, 'call_sent_at')).call_failed_code).toBeUndefined();
    const record = await settled(tooLong, 'call_failed_at');
    expect(record.call_failed_code).toBe('CALL_MESSAGE_TOO_LONG');
    expect(record.call_sent_at).toBeUndefined();
    const calls = (await t.app.inject({ method: 'GET', url: '/dev-carrier/calls', headers: t.auth })).json().calls as { to: string }[];
    expect(calls.map((c) => c.to)).not.toContain('+14155550142');
  });

  it('a number the carrier refuses fails the call permanently', async () => {
    const trackingId = await call({ id: 'bad-callee', number: '+15005550001' }, 'Hello');
    const record = await settled(trackingId, 'call_failed_at');
    expect(record.call_failed_code).toBe('INVALID_TO_NUMBER');
    expect(record.call_sent_at).toBeUndefined();
  });
});

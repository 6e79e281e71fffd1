// The development carrier's simulated texts to the shared number (CLARION_DEFAULT_SMS_FROM, every
// account's sender, no account's own) act only in the account and environment that simulated
// them: another account, or another environment of the same account, cannot put a text on a
// log, suppress a user, emit SMS_INBOUND / SMS_UNSUBSCRIBE or fire an auto-reply there. The
// carrier delivers the signed inbound webhook over real HTTP and answers once Clarion answered
// it, so by then the text's log fields, suppressions, stored events and any auto-reply exist.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const SHARED = '+14155550100';
const USER = '+14155550171';

describe.each(STORAGE_KINDS)('development carrier: texts simulated to the shared number (%s)', (kind) => {
  let t: TestContext;
  let receiver: WebhookReceiver;
  /** Account C (the context's): sends from the shared number. */
  let c: { authorization: string };
  /** C's second environment. */
  let c2: { authorization: string };
  /** Account B: another tenant of the same server. */
  let b: { authorization: string };
  type Headers = { authorization: string };
  const bearer = (key: string): Headers => ({ authorization: `Bearer ${key}` });
  const log = async (headers: Headers, trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers })).json().logs[0] as Record<string, unknown>;
  const settled = (headers: Headers, trackingId: string, field: string) =>
    eventually(async () => ((await log(headers, trackingId))?.[field] !== undefined ? log(headers, trackingId) : undefined), 15_000, field);
  const send = async (headers: Headers, payload: object) => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers, payload });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ trackingId: string }>().trackingId;
  };
  const simulate = async (headers: Headers, text: string) => {
    const res = await t.app.inject({ method: 'POST', url: '/dev-carrier/inbound', headers, payload: { from: USER, to: SHARED, text } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ to: SHARED, webhook: { status: 200 } });
  };
  /** Whether a user is suppressed for SMS (read from the row: a probing send would become the user's last send). */
  const suppressed = async (clientId: string, userId: string) => {
    const row = await t.deps.db.selectFrom('users').select('suppressions').where('env_id', '=', clientId).where('id', '=', userId).executeTakeFirstOrThrow();
    return row.suppressions !== null && (JSON.parse(row.suppressions) as Record<string, unknown>).SMS !== undefined;
  };
  const routing = async (headers: Headers, userId: string) => {
    const record = await settled(headers, await send(headers, { type: 'promo', to: { id: userId }, sms: { message: 'promo', from: SHARED } }), 'sms_routing');
    return [record.sms_routing, record.sms_routing_reason].filter((v) => typeof v === 'string').join(' ');
  };
  const events = (trackingId: string) =>
    t.deps.db
      .withTables<{ webhook_events: { type: string; tracking_id: string | null } }>()
      .selectFrom('webhook_events')
      .select('type')
      .where('tracking_id', '=', trackingId)
      .execute()
      .then((rows) => rows.map((r) => r.type));
  /** Every text the carrier was asked to send to the user, whoever asked. */
  const toUser = () =>
    t.deps.db
      .withTables<{ dev_carrier_messages: { to_number: string; direction: string; body: string | null; created_at: string } }>()
      .selectFrom('dev_carrier_messages')
      .select('body')
      .where('to_number', '=', USER)
      .where('direction', '=', 'outbound')
      .orderBy('created_at')
      .execute()
      .then((rows) => rows.map((r) => r.body));
  const subscribe = async (headers: Headers) => {
    const res = await t.app.inject({ method: 'POST', url: '/webhooks', headers, payload: { webhook: receiver.url, events: ['SMS_INBOUND', 'SMS_UNSUBSCRIBE'] } });
    expect(res.statusCode, res.body).toBe(200);
  };

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    t = await createTestContext(kind, { workers: true, config: { defaultSmsFrom: SHARED, allowPrivateNetworks: true } });
    t.deps.config.publicUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    c = t.auth;
    const second = (await t.app.inject({ method: 'POST', url: '/environments', headers: c, payload: { title: 'Second' } })).json<{ clientId: string }>();
    c2 = bearer((await t.app.inject({ method: 'POST', url: '/keys', headers: c, payload: { name: 'second', environmentId: second.clientId } })).json<{ key: string }>().key);
    b = bearer((await t.newAccount('Neighbour')).apiKey);
    // Endpoints subscribed in every environment, so the events a text causes are stored with it (not delivered: no worker).
    for (const headers of [c, c2, b]) await subscribe(headers);
    // Both accounts give back their development number: they text from the shared number.
    for (const headers of [c, b]) {
      const [own] = (await t.app.inject({ method: 'GET', url: '/numbers/list', headers })).json<{ numbers: { phoneNumber: string }[] }>().numbers;
      const released = await t.app.inject({ method: 'DELETE', url: `/numbers/${encodeURIComponent(own.phoneNumber)}`, headers });
      expect(released.statusCode, released.body).toBe(200);
      expect((await t.app.inject({ method: 'GET', url: '/numbers/list', headers })).json()).toEqual({ numbers: [], sharedNumber: SHARED });
    }
  });
  afterAll(async () => {
    await t.services.devCarrier?.drain();
    await t?.close();
    await receiver?.close();
  });

  it("another account's STOP and text to the shared number touch nothing of C's; C's own act on C's send", async () => {
    const carols = await send(c, { type: 'survey', to: { id: 'carol', number: USER }, sms: { message: 'hello', from: SHARED, autoReply: { message: 'AUTO' } } });
    expect((await settled(c, carols, 'sms_delivered_at')).sms_sent_from).toBe(SHARED);

    // B simulates the user texting the shared number: B never sent them anything, so nothing is recorded anywhere.
    await simulate(b, 'STOP');
    await simulate(b, 'hey there');
    expect(await log(c, carols)).not.toHaveProperty('sms_inbound_text');
    expect(await events(carols)).toEqual([]);
    expect(await toUser()).toEqual(['hello']);
    expect(await suppressed(t.account.clientId, 'carol')).toBe(false);

    // C's other environment is no more C's first environment than B is.
    await simulate(c2, 'STOP');
    expect(await log(c, carols)).not.toHaveProperty('sms_inbound_text');
    expect(await events(carols)).toEqual([]);
    expect(await suppressed(t.account.clientId, 'carol')).toBe(false);

    // C itself: the text lands on C's send and gets C's auto-reply, even though a later send to
    // the user from the shared number (B's) is the last one overall.
    const bobs = await send(b, { type: 'survey', to: { id: 'bob', number: USER }, sms: { message: 'from B', from: SHARED, autoReply: { message: 'B-AUTO' } } });
    await settled(b, bobs, 'sms_delivered_at');
    const before = (await toUser()).length;
    await simulate(c, 'hey there');
    expect(await log(c, carols)).toMatchObject({ sms_inbound_text: 'hey there', sms_replied_text: 'AUTO' });
    expect(await log(b, bobs)).not.toHaveProperty('sms_inbound_text');
    expect((await toUser()).slice(before)).toEqual(['AUTO']);

    // And B's STOP now lands on B's send and suppresses only B's user.
    await simulate(b, 'STOP');
    expect(await log(b, bobs)).toMatchObject({ sms_inbound_text: 'STOP' });
    expect(await events(bobs)).toEqual(expect.arrayContaining(['SMS_INBOUND', 'SMS_UNSUBSCRIBE']));
    expect(await log(c, carols)).toMatchObject({ sms_inbound_text: 'hey there' });
    expect(await events(carols)).toEqual(['SMS_INBOUND']);
    expect(await routing(b, 'bob')).toBe('SKIP USER_SUPPRESSED');
    expect(await routing(c, 'carol')).toBe('SEND');
  });
});

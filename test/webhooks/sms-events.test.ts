// SMS events end to end: texts a user sends to one of the account's numbers come in through the
// development carrier's signed inbound webhook (Twilio protocol over real HTTP) and reach a
// loopback webhook endpoint as SMS_INBOUND, and STOP / START also as SMS_UNSUBSCRIBE /
// SMS_SUBSCRIBE, signed for pingram/webhooks and standardwebhooks. The events are committed with
// the log fields and suppressions they report (present as soon as the carrier's request is
// answered), and what the endpoint answered lands in the log once its attempt is recorded
// (`sms_inbound_webhook_*`, `sms_unsubscribe_webhook_*`, `sms_subscribe_webhook_*`); a text from
// a number never sent to records nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver, verifySignatures } from '../helpers/webhook-receiver.js';

interface Payload {
  id: string;
  eventType: string;
  channel: string;
  userId: string;
  notificationId: string;
  trackingId: string;
  occurredAt: string;
  details: Record<string, unknown>;
}

describe.each(STORAGE_KINDS)('SMS events through the development carrier (%s)', (kind) => {
  let t: TestContext;
  let receiver: WebhookReceiver;
  let secret: string;
  let ours: string;
  const call = (method: 'GET' | 'POST', url: string, payload?: object) => t.app.inject({ method, url, headers: t.auth, ...(payload ? { payload } : {}) });
  const log = async (trackingId: string) => (await call('GET', `/logs/${trackingId}`)).json().logs?.[0] as Record<string, unknown> | undefined;
  const text = async (from: string, body: string) => {
    const res = await call('POST', '/dev-carrier/inbound', { from, text: body });
    expect(res.statusCode).toBe(200);
    expect(res.json().webhook.status).toBe(200);
  };
  /** Stored events of a kind for a tracking id: written by the time the carrier's request was answered. */
  const stored = async (type: string, trackingId: string) =>
    t.deps.db
      .withTables<{ webhook_events: { type: string; tracking_id: string | null; payload: string } }>()
      .selectFrom('webhook_events')
      .select('payload')
      .where('type', '=', type)
      .where('tracking_id', '=', trackingId)
      .execute();
  /** Delivered (and verified) events of a kind for a tracking id. */
  const received = (type: string, trackingId: string) =>
    receiver.requests
      .map((r) => ({ r, p: JSON.parse(r.body) as Payload }))
      .filter(({ p }) => p.eventType === type && p.trackingId === trackingId)
      .map(({ r, p }) => {
        verifySignatures(r, secret);
        return p;
      });
  const sendSms = async (user: { id: string; number?: string }, type = 'promo') => {
    const res = await call('POST', '/send', { type, to: user, sms: { message: 'Sale today' } });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();
    // Sent (the carrier took it), or routed SKIP.
    await eventually(async () => {
      const record = await log(trackingId);
      return record?.sms_sent_at !== undefined || record?.sms_routing === 'SKIP';
    }, 15_000, 'sms_sent_at or SKIP');
    return trackingId;
  };

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    t = await createTestContext(kind, { workers: true, config: { allowPrivateNetworks: true, webhookPollMs: 20 } });
    // The carrier signs its webhook for, and posts it to, the address Clarion listens on.
    t.deps.config.publicUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    t.services.webhooks.worker.start();
    ours = (await call('GET', '/numbers/list')).json().numbers[0].phoneNumber;
    const endpoint = await call('POST', '/webhooks', { webhook: receiver.url, events: ['SMS_INBOUND', 'SMS_UNSUBSCRIBE', 'SMS_SUBSCRIBE'] });
    expect(endpoint.statusCode).toBe(200);
    secret = endpoint.json().secret;
  });
  afterAll(async () => {
    // The carrier's status callbacks of the last sends finish while Clarion still listens (after
    // close they would wait out their timeouts against a closing server).
    await t.services.devCarrier?.drain();
    await t.services.webhooks.worker.stop();
    await t.close();
    await receiver.close();
  });

  it('an inbound text is SMS_INBOUND with the last send to that user from that number, committed with its log fields', async () => {
    const user = { id: 'texter', number: '+14155550141' };
    await sendSms(user, 'older_promo');
    const trackingId = await sendSms({ id: user.id }, 'order_update');
    await text(user.number, 'Where is my parcel?');

    // Written with the log fields, before the carrier got its answer.
    expect(await stored('SMS_INBOUND', trackingId)).toHaveLength(1);
    expect(await log(trackingId)).toMatchObject({ sms_inbound_text: 'Where is my parcel?', sms_inbound_from: user.number });

    const [event] = await eventually(() => received('SMS_INBOUND', trackingId).length === 1 && received('SMS_INBOUND', trackingId), 10_000, 'SMS_INBOUND');
    expect(event).toMatchObject({ eventType: 'SMS_INBOUND', channel: 'SMS', userId: 'texter', notificationId: 'order_update', trackingId });
    expect(event.details).toMatchObject({
      sms_inbound_from: user.number,
      sms_inbound_to: ours,
      sms_inbound_text: 'Where is my parcel?',
      sms_inbound_message_sid: expect.stringMatching(/^SM[0-9a-f]{32}$/),
      sms_inbound_at: event.occurredAt,
      sms_sent_at: expect.any(String),
    });
    expect(Date.parse(String(event.details.sms_sent_at))).toBeLessThanOrEqual(Date.parse(event.occurredAt));
    // Not an opt-out keyword: no (un)subscribe event.
    expect(await stored('SMS_UNSUBSCRIBE', trackingId)).toHaveLength(0);
    // What the endpoint answered, in the log once the attempt is recorded.
    expect(await eventually(async () => {
      const record = await log(trackingId);
      return record?.sms_inbound_webhook_delivered !== undefined && record;
    }, 10_000, 'sms_inbound_webhook_delivered')).toMatchObject({ sms_inbound_webhook_delivered: true, sms_inbound_webhook_res: 'HTTP 200: ok' });
  });

  it('STOP is SMS_INBOUND and SMS_UNSUBSCRIBE, with the suppression; START is SMS_SUBSCRIBE and lifts it', async () => {
    const user = { id: 'stopper', number: '+14155550142' };
    const trackingId = await sendSms(user);
    await text(user.number, 'Stop.');
    expect((await stored('SMS_UNSUBSCRIBE', trackingId)).length).toBe(1);
    expect(await log(await sendSms({ id: user.id }))).toMatchObject({ sms_routing: 'SKIP', sms_routing_reason: 'USER_SUPPRESSED' });

    const [unsubscribe] = await eventually(() => received('SMS_UNSUBSCRIBE', trackingId).length === 1 && received('SMS_UNSUBSCRIBE', trackingId), 10_000, 'SMS_UNSUBSCRIBE');
    expect(unsubscribe).toMatchObject({ channel: 'SMS', userId: 'stopper', notificationId: 'promo', trackingId, details: { keyword: 'STOP', sms_inbound_text: 'Stop.', sms_inbound_from: user.number, sms_inbound_to: ours } });
    expect(unsubscribe.details.sms_unsubscribed_at).toBe(unsubscribe.occurredAt);
    expect(received('SMS_INBOUND', trackingId).map((e) => e.details.sms_inbound_text)).toEqual(['Stop.']);

    await text(user.number, 'start');
    const [subscribe] = await eventually(() => received('SMS_SUBSCRIBE', trackingId).length === 1 && received('SMS_SUBSCRIBE', trackingId), 10_000, 'SMS_SUBSCRIBE');
    expect(subscribe).toMatchObject({ channel: 'SMS', userId: 'stopper', trackingId, details: { keyword: 'START', sms_inbound_text: 'start' } });
    expect(subscribe.details.sms_subscribed_at).toBe(subscribe.occurredAt);
    const again = await sendSms({ id: user.id });
    expect((await log(again))?.sms_routing).toBe('SEND');
    // The opt-out events' answers are in the log of the send they answer.
    expect(await eventually(async () => {
      const record = await log(trackingId);
      return record?.sms_subscribe_webhook_delivered !== undefined && record?.sms_unsubscribe_webhook_delivered !== undefined && record;
    }, 10_000, 'sms_(un)subscribe_webhook_delivered')).toMatchObject({
      sms_inbound_webhook_delivered: true,
      sms_unsubscribe_webhook_delivered: true,
      sms_unsubscribe_webhook_res: 'HTTP 200: ok',
      sms_subscribe_webhook_delivered: true,
      sms_subscribe_webhook_res: 'HTTP 200: ok',
    });
  });

  it('a text, STOP included, from a number never sent to from this number records nothing and emits nothing', async () => {
    const before = (await t.deps.db.withTables<{ webhook_events: { id: string } }>().selectFrom('webhook_events').select('id').execute()).length;
    await text('+14155550143', 'STOP');
    await text('+14155550143', 'hello?');
    const after = (await t.deps.db.withTables<{ webhook_events: { id: string } }>().selectFrom('webhook_events').select('id').execute()).length;
    expect(after).toBe(before);
  });
});

// Webhook delivery into a scripted loopback receiver: every ledger event type arrives, signed so
// that pingram/webhooks and standardwebhooks verify it; retries follow the schedule under a
// manual clock and keep their id; Retry-After, 410, redirects, hangs; attempts, replay, recovery.
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RETRY_DELAYS_MS } from '../../src/modules/webhooks/schedule.js';
import type { WebhookTables } from '../../src/modules/webhooks/webhooks.tables.js';
import { WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver, verifySignatures } from '../helpers/webhook-receiver.js';
import { manualClockWebhooks, transition } from './webhook-fixtures.js';

const LEDGER_EVENTS = ['EMAIL_DELIVERED', 'EMAIL_FAILED', 'SMS_DELIVERED', 'SMS_FAILED', 'PUSH_FAILED', 'CALL_FAILED', 'WEB_PUSH_FAILED', 'SLACK_FAILED', 'INAPP_WEB_FAILED'];

describe.each(STORAGE_KINDS)('webhook delivery, real clock (%s)', (kind) => {
  let t: TestContext;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    t = await createTestContext(kind, { config: { allowPrivateNetworks: true, webhookPollMs: 20 } });
    receiver = await new WebhookReceiver().start();
    t.services.webhooks.worker.start();
  });
  afterAll(async () => {
    await t.services.webhooks.worker.stop();
    await receiver.close();
    await t.close();
  });
  const create = async (events: string[], url = receiver.url) => {
    const res = await t.app.inject({ method: 'POST', url: '/webhooks', headers: t.auth, payload: { webhook: url, events } });
    expect(res.statusCode).toBe(200);
    return res.json<{ id: string; secret: string }>();
  };

  it('delivers every event the ledger produces, signed for pingram/webhooks and standardwebhooks', async () => {
    const endpoint = await create([...LEDGER_EVENTS, 'SMS_INBOUND']);
    const unsubscribed = await create(['EMAIL_OPEN']);
    const made: Record<string, string> = {
      EMAIL_DELIVERED: await transition(t, 'email', 'sent'),
      EMAIL_FAILED: await transition(t, 'email', 'failed'),
      SMS_DELIVERED: await transition(t, 'sms', 'delivered'),
      SMS_FAILED: await transition(t, 'sms', 'failed'),
      PUSH_FAILED: await transition(t, 'mobile_push', 'failed'),
      CALL_FAILED: await transition(t, 'call', 'failed'),
      WEB_PUSH_FAILED: await transition(t, 'web_push', 'failed'),
      SLACK_FAILED: await transition(t, 'slack', 'failed'),
      INAPP_WEB_FAILED: await transition(t, 'inapp', 'failed'),
    };
    // No event: a web push accepted by the push service is not in the catalogue.
    await transition(t, 'web_push', 'sent');
    // An event that is not a ledger transition, written by its producer with its own transaction.
    await t.deps.db.transaction().execute((trx) =>
      t.services.webhooks.outbox.emit(trx, [
        {
          accountId: t.account.accountId,
          envId: t.account.clientId,
          type: 'SMS_INBOUND',
          payload: { channel: 'SMS', userId: 'user-x', notificationId: 'order_shipped', trackingId: 'trk-in', occurredAt: new Date().toISOString(), details: { from: '+15550001111', text: 'hello' } },
        },
      ]),
    );

    const got = await eventually(() => receiver.requests.length >= 10 && receiver.requests, 10_000, '10 deliveries');
    expect(got).toHaveLength(10);
    const byType = new Map<string, Record<string, unknown>>();
    for (const req of got) {
      expect(req.headers['content-type']).toBe('application/json');
      const { viaPingram, viaStandard } = verifySignatures(req, endpoint.secret);
      expect(viaStandard).toEqual(viaPingram);
      const payload = viaPingram as unknown as Record<string, unknown>;
      expect(payload.id).toBe(req.headers['x-service-id']);
      expect(req.headers['webhook-id']).toBe(payload.id);
      expect(Number(req.headers['x-service-timestamp'])).toBe(Number(req.headers['webhook-timestamp']) * 1000 + (Number(req.headers['x-service-timestamp']) % 1000));
      byType.set(payload.eventType as string, payload);
    }
    expect([...byType.keys()].sort()).toEqual([...LEDGER_EVENTS, 'SMS_INBOUND'].sort());
    for (const type of LEDGER_EVENTS) {
      const p = byType.get(type)!;
      expect(p).toMatchObject({ trackingId: made[type], notificationId: 'order_shipped', userId: expect.stringMatching(/^user-/), occurredAt: expect.any(String), details: expect.any(Object) });
      if (type.endsWith('_FAILED')) expect(p.failureCode).toMatch(/_REFUSED$/);
      else expect(p.failureCode).toBeUndefined();
    }
    expect(byType.get('EMAIL_FAILED')).toMatchObject({ channel: 'EMAIL', failureCode: 'EMAIL_REFUSED', details: { reason: 'the provider refused it', email_failed_internal: 'refused' } });
    expect(byType.get('PUSH_FAILED')!.channel).toBe('PUSH');
    expect(byType.get('INAPP_WEB_FAILED')!.channel).toBe('INAPP_WEB');
    expect(byType.get('SMS_INBOUND')).toMatchObject({ channel: 'SMS', trackingId: 'trk-in', details: { from: '+15550001111', text: 'hello' } });
    // A tampered body or another secret fails both verifiers.
    const one = got[0];
    expect(() => verifySignatures({ ...one, body: one.body.replace('"trackingId"', '"trackingID"') }, endpoint.secret)).toThrow();
    expect(() => verifySignatures(one, unsubscribed.secret)).toThrow();
    // The endpoint subscribed to nothing that happened got nothing; attempts were stored.
    // Recorded just after the receiver answered.
    const attempts = await eventually(async () => {
      const res = await t.app.inject({ method: 'GET', url: `/webhooks/${endpoint.id}/attempts`, headers: t.auth });
      return res.json().attempts.length === 10 && res;
    }, 10_000, '10 attempts recorded');
    expect(attempts.json().attempts[0]).toMatchObject({ success: true, statusCode: 200, response: 'ok', attempt: 1, trigger: 'event' });
    expect((await t.app.inject({ method: 'GET', url: `/webhooks/${unsubscribed.id}/attempts`, headers: t.auth })).json().attempts).toEqual([]);
    for (const id of [endpoint.id, unsubscribed.id]) await t.app.inject({ method: 'DELETE', url: `/webhooks/${id}`, headers: t.auth });
  });

  it('signs with both secrets while a rotated one overlaps; X-Service-Signature uses the new one', async () => {
    receiver.requests.length = 0;
    const endpoint = await create(['EMAIL_FAILED']);
    const rotated = (await t.app.inject({ method: 'POST', url: `/webhooks/${endpoint.id}/secret`, headers: t.auth })).json<{ secret: string }>();
    await transition(t, 'email', 'failed');
    const [req] = await eventually(() => receiver.requests.length >= 1 && receiver.requests, 10_000, 'a delivery');
    expect(String(req.headers['webhook-signature']).split(' ')).toHaveLength(2);
    // Standard Webhooks: either secret verifies. pingram: the new one.
    expect(new Webhook(endpoint.secret).verify(req.body, req.headers as Record<string, string>)).toBeTruthy();
    expect(new Webhook(rotated.secret).verify(req.body, req.headers as Record<string, string>)).toBeTruthy();
    expect(verifySignatures(req, rotated.secret).viaPingram).toBeTruthy();
    expect(() => verifySignatures(req, endpoint.secret)).toThrow();
    await t.app.inject({ method: 'DELETE', url: `/webhooks/${endpoint.id}`, headers: t.auth });
  });

  it('a hanging endpoint does not hold up another one', async () => {
    const slow = await new WebhookReceiver().start();
    slow.answer('hang');
    receiver.requests.length = 0;
    try {
      const stuck = await create(['SMS_FAILED'], slow.url);
      const fine = await create(['EMAIL_FAILED']);
      // More hanging events than the process has request slots (64), then the other endpoint's.
      for (let i = 0; i < 70; i++) await transition(t, 'sms', 'failed');
      await eventually(() => slow.requests.length >= 8, 10_000, 'the slow endpoint to hold its requests');
      for (let i = 0; i < 5; i++) await transition(t, 'email', 'failed');
      await eventually(() => receiver.requests.length >= 5, 10_000, 'the other endpoint to get its events');
      // The slow one holds at most its per-endpoint share, and none of its requests has ended.
      expect(slow.requests.length).toBe(8);
      expect((await t.services.webhooks.attempts({ accountId: t.account.accountId, envId: t.account.clientId }, stuck.id, {})).attempts).toEqual([]);
      for (const id of [stuck.id, fine.id]) await t.app.inject({ method: 'DELETE', url: `/webhooks/${id}`, headers: t.auth });
    } finally {
      await slow.close();
    }
  });
});

describe.each(STORAGE_KINDS)('webhook retries under a manual clock (%s)', (kind) => {
  const h = manualClockWebhooks(kind);
  const { clock, scope } = h;
  let t: TestContext;
  let receiver: WebhookReceiver;
  let service: WebhooksService;
  beforeAll(() => ({ t, receiver, service } = h));
  let endpointId = '';
  beforeEach(async () => {
    receiver.requests.length = 0;
    receiver.answer({ status: 200, body: 'ok' });
    endpointId = (await service.create(scope(), { webhook: receiver.url, events: ['EMAIL_FAILED', 'SMS_FAILED'] })).id;
  });
  afterEach(async () => {
    await service.delete(scope(), endpointId).catch(() => undefined);
  });

  it('retries on the schedule (first within a minute, about a day in all), keeping the event id, then gives up', async () => {
    receiver.answer({ status: 500, body: 'boom' });
    await transition(t, 'email', 'failed');
    const start = clock.now().getTime();
    expect(await service.worker.runOnce()).toBe(1);
    let elapsed = 0;
    for (const delay of RETRY_DELAYS_MS) {
      // Not before its time...
      clock.set(new Date(start + elapsed + delay - 1));
      expect(await service.worker.runOnce()).toBe(0);
      // ...and at it.
      clock.set(new Date(start + elapsed + delay));
      expect(await service.worker.runOnce()).toBe(1);
      elapsed += delay;
    }
    expect(RETRY_DELAYS_MS[0]).toBeLessThanOrEqual(60_000 / 1.2);
    expect(elapsed).toBeGreaterThan(20 * 3600_000);
    expect(elapsed).toBeLessThan(26 * 3600_000);
    // Spent: no more attempts, ever.
    clock.advance(7 * 24 * 3600_000);
    expect(await service.worker.runOnce()).toBe(0);

    expect(receiver.requests).toHaveLength(10);
    const ids = new Set(receiver.requests.map((r) => r.headers['x-service-id']));
    expect(ids.size).toBe(1);
    expect(new Set(receiver.requests.map((r) => r.body)).size).toBe(1);
    const { attempts } = await service.attempts(scope(), endpointId, { limit: 200 });
    expect(attempts.map((a) => a.attempt)).toEqual([10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
    expect(attempts[0]).toMatchObject({ success: false, statusCode: 500, response: 'boom', nextAttemptAt: null, trigger: 'retry' });
    expect(attempts[9].nextAttemptAt).toBe(new Date(start + 30_000).toISOString());
    clock.set(new Date(start));
  });

  it('honours Retry-After, fails on redirects without following them, and recovers on a 2xx', async () => {
    const target = await new WebhookReceiver().start();
    try {
      receiver.answer({ status: 429, headers: { 'retry-after': '120' } }, { status: 302, headers: { location: target.url } }, { status: 503, headers: { 'retry-after': '7' } }, { status: 204 });
      await transition(t, 'sms', 'failed');
      const t0 = clock.now().getTime();
      expect(await service.worker.runOnce()).toBe(1);
      clock.set(new Date(t0 + 119_999));
      expect(await service.worker.runOnce()).toBe(0);
      clock.set(new Date(t0 + 120_000));
      expect(await service.worker.runOnce()).toBe(1); // 302: a failure, the schedule's second delay (2 min)
      clock.set(new Date(t0 + 120_000 + 120_000));
      expect(await service.worker.runOnce()).toBe(1); // 503 Retry-After 7
      clock.set(new Date(t0 + 240_000 + 7_000));
      expect(await service.worker.runOnce()).toBe(1); // 204
      clock.advance(24 * 3600_000);
      expect(await service.worker.runOnce()).toBe(0);
      expect(target.requests).toHaveLength(0);
      const { attempts } = await service.attempts(scope(), endpointId, {});
      expect(attempts.map((a) => [a.statusCode, a.success])).toEqual([
        [204, true],
        [503, false],
        [302, false],
        [429, false],
      ]);
      expect(attempts[2].error).toContain('redirects are not followed');
      expect((await service.get(scope(), endpointId)).failingSince).toBeUndefined();
      clock.set(new Date(t0));
    } finally {
      await target.close();
    }
  });

  it('records a hang as a timeout, and keeps the first 4 KB of a response', async () => {
    receiver.answer('hang', { status: 500, body: 'x'.repeat(10_000) });
    await transition(t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    clock.advance(30_000);
    expect(await service.worker.runOnce()).toBe(1);
    const { attempts } = await service.attempts(scope(), endpointId, {});
    expect(attempts[1]).toMatchObject({ statusCode: null, success: false, error: expect.stringContaining('TIMEOUT') });
    expect(attempts[0].response).toHaveLength(4096);
  });

  it('stops reading a response past 64 KB, keeps its first 4 KB, and goes on delivering', async () => {
    // 300 KB of two-byte characters: the first 4096 bytes are 2048 whole ones.
    receiver.answer({ status: 200, body: 'é'.repeat(150_000) }, { status: 200, body: 'ok' });
    await transition(t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    await transition(t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    const { attempts } = await service.attempts(scope(), endpointId, {});
    expect(attempts.map((a) => [a.success, a.statusCode])).toEqual([
      [true, 200],
      [true, 200],
    ]);
    expect(attempts[1].response).toBe('é'.repeat(2048));
    expect(attempts[0].response).toBe('ok');
  });

  it('disables an endpoint that answers 410, and shows why', async () => {
    receiver.answer({ status: 410 });
    await transition(t, 'email', 'failed');
    await transition(t, 'email', 'failed');
    await service.worker.runOnce();
    const view = await service.get(scope(), endpointId);
    expect(view).toMatchObject({ disabled: true, disabledReason: expect.stringContaining('410') });
    // Nothing more goes to it; an update enables it again.
    receiver.answer({ status: 200 });
    await transition(t, 'email', 'failed');
    clock.advance(3600_000);
    const before = receiver.requests.length;
    expect(await service.worker.runOnce()).toBe(0);
    expect(receiver.requests.length).toBe(before);
    const enabled = await service.update(scope(), endpointId, { webhook: receiver.url, events: ['EMAIL_FAILED'] });
    expect(enabled.disabled).toBeUndefined();
  });

  it('disables an endpoint that failed for 5 days', async () => {
    receiver.answer({ status: 500 });
    await transition(t, 'email', 'failed');
    await service.worker.runOnce();
    expect((await service.get(scope(), endpointId)).failingSince).toBe(clock.now().toISOString());
    for (let day = 1; day <= 5; day++) {
      clock.advance(24 * 3600_000);
      await transition(t, 'email', 'failed');
      await service.worker.runOnce();
    }
    const view = await service.get(scope(), endpointId);
    expect(view).toMatchObject({ disabled: true, disabledReason: expect.stringContaining('5 days') });
    expect(view.disabledReason).toContain('HTTP 500');
  });

  it('lists attempts with a cursor and filters; replays one event; recovers the failed ones', async () => {
    receiver.answer({ status: 500 });
    await transition(t, 'email', 'failed');
    await transition(t, 'sms', 'failed');
    await transition(t, 'email', 'failed');
    const since = clock.now().toISOString();
    expect(await service.worker.runOnce()).toBe(3);
    receiver.answer({ status: 200 });
    clock.advance(30_000);
    expect(await service.worker.runOnce()).toBe(3);

    const page1 = await service.attempts(scope(), endpointId, { limit: 4 });
    expect(page1.attempts).toHaveLength(4);
    const page2 = await service.attempts(scope(), endpointId, { limit: 4, cursor: page1.nextCursor });
    expect(page2.attempts).toHaveLength(2);
    expect(page2.nextCursor).toBeUndefined();
    await expect(service.attempts(scope(), endpointId, { cursor: 'zz' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED', message: 'cursor is not a cursor of this list.' });
    expect(new Set([...page1.attempts, ...page2.attempts].map((a) => a.id)).size).toBe(6);
    expect((await service.attempts(scope(), endpointId, { failed: true })).attempts).toHaveLength(3);
    expect((await service.attempts(scope(), endpointId, { failed: false })).attempts).toHaveLength(3);
    expect((await service.attempts(scope(), endpointId, { event: 'SMS_FAILED' })).attempts).toHaveLength(2);

    // Replay over HTTP: the same event id again.
    const eventId = page1.attempts[0].eventId;
    const replay = await t.app.inject({ method: 'POST', url: `/webhooks/${endpointId}/events/${eventId}/replay`, headers: t.auth });
    expect(replay.statusCode).toBe(202);
    expect(await service.worker.runOnce()).toBe(1);
    expect(receiver.requests.at(-1)!.headers['x-service-id']).toBe(eventId);
    expect((await t.app.inject({ method: 'POST', url: `/webhooks/${endpointId}/events/evt_none/replay`, headers: t.auth })).statusCode).toBe(404);
    // An event of a type the endpoint never subscribed to (another endpoint's) is not replayed to it.
    const other = (await service.create(scope(), { webhook: receiver.url, events: ['EMAIL_DELIVERED'] })).id;
    await transition(t, 'email', 'delivered');
    expect(await service.worker.runOnce()).toBe(1);
    const delivered = (await service.attempts(scope(), other, {})).attempts[0].eventId;
    const foreign = await t.app.inject({ method: 'POST', url: `/webhooks/${endpointId}/events/${delivered}/replay`, headers: t.auth });
    expect([foreign.statusCode, foreign.json().error.message]).toEqual([400, `Webhook endpoint "${endpointId}" is not subscribed to EMAIL_DELIVERED, the type of event ${delivered}.`]);
    expect(await service.worker.runOnce()).toBe(0);
    await service.delete(scope(), other);

    // Two events that failed for good, then recovery since a time.
    receiver.answer({ status: 500 });
    await transition(t, 'email', 'failed');
    await transition(t, 'email', 'failed');
    await service.worker.runOnce();
    for (const delay of RETRY_DELAYS_MS) {
      clock.advance(delay);
      await service.worker.runOnce();
    }
    receiver.answer({ status: 200 });
    const failedIds = new Set(receiver.requests.slice(-2).map((r) => r.headers['x-service-id']));
    const recover = await t.app.inject({ method: 'POST', url: `/webhooks/${endpointId}/recover`, headers: t.auth, payload: { since } });
    expect(recover.statusCode).toBe(202);
    expect(recover.json()).toEqual({ recovered: 2 });
    expect(await service.worker.runOnce()).toBe(2);
    expect(new Set(receiver.requests.slice(-2).map((r) => r.headers['x-service-id']))).toEqual(failedIds);
    expect((await t.app.inject({ method: 'POST', url: `/webhooks/${endpointId}/recover`, headers: t.auth, payload: { since } })).json()).toEqual({ recovered: 0 });
  });

  it('writes and records a batch of 21 events whole (SQLite writes it in runs of 16, 4 and 1 rows)', async () => {
    // Room for the whole batch at once, so that one dispatch writes it and one flush records it.
    const wide = new WebhooksService(t.deps, { random: () => 0.5, perEndpoint: 32, concurrency: 64 });
    try {
      const made: string[] = [];
      for (let i = 0; i < 21; i++) made.push(await transition(t, 'email', 'failed'));
      expect(await wide.worker.runOnce()).toBe(21);
      expect(receiver.requests.map((r) => (JSON.parse(r.body) as { trackingId: string }).trackingId).sort()).toEqual([...made].sort());
      const { attempts } = await service.attempts(scope(), endpointId, { limit: 50 });
      expect(attempts).toHaveLength(21);
      expect(new Set(attempts.map((a) => a.eventId))).toEqual(new Set(receiver.requests.map((r) => r.headers['x-service-id'])));
      for (const a of attempts) {
        expect(a).toEqual({ id: expect.any(String), eventId: expect.stringMatching(/^evt_/), eventType: 'EMAIL_FAILED', attempt: 1, at: clock.now().toISOString(), success: true, statusCode: 200, durationMs: expect.any(Number), response: 'ok', error: null, nextAttemptAt: null, trigger: 'event' });
      }
      const db = t.deps.db.withTables<WebhookTables>();
      const deliveries = await db.selectFrom('webhook_deliveries').selectAll().where('endpoint_id', '=', endpointId).execute();
      expect(deliveries).toHaveLength(21);
      for (const d of deliveries) {
        expect({ ...d, attempts: Number(d.attempts), round_attempts: Number(d.round_attempts) }).toMatchObject({
          account_id: scope().accountId,
          env_id: scope().envId,
          event_type: 'EMAIL_FAILED',
          status: 'succeeded',
          attempts: 1,
          round_attempts: 1,
          lease: null,
          last_error: null,
          last_attempt_at: clock.now().toISOString(),
          created_at: clock.now().toISOString(),
        });
      }
      const events = await db.selectFrom('webhook_events').selectAll().where('id', 'in', deliveries.map((d) => d.event_id)).execute();
      expect(events.map((e) => e.tracking_id).sort()).toEqual([...made].sort());
      for (const e of events) expect(JSON.parse(e.payload)).toMatchObject({ id: e.id, eventType: 'EMAIL_FAILED', trackingId: e.tracking_id });
    } finally {
      await wide.sender.close();
    }
  });

  it('purges settled deliveries, their events and attempts past the retention, keeping pending ones', async () => {
    receiver.answer({ status: 200 });
    await transition(t, 'email', 'failed');
    await service.worker.runOnce();
    receiver.answer({ status: 500 });
    await transition(t, 'sms', 'failed');
    await service.worker.runOnce();
    const count = async (table: 'webhook_events' | 'webhook_deliveries' | 'webhook_attempts') =>
      Number((await t.deps.db.withTables<Record<typeof table, { endpoint_id?: string; id: string }>>().selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    const before = { events: await count('webhook_events'), deliveries: await count('webhook_deliveries'), attempts: await count('webhook_attempts') };
    await service.repo.purgeBefore(new Date(clock.now().getTime() + 1000).toISOString());
    // The pending (retrying) delivery and its event stay; the succeeded one goes with its event; every attempt goes.
    expect(await count('webhook_deliveries')).toBe(1);
    expect(await count('webhook_events')).toBe(1);
    expect(await count('webhook_attempts')).toBe(0);
    expect(before.deliveries).toBeGreaterThan(1);
  });
});

// Retract on both engines, the test routing and delivering by hand (no workers), so every state
// is held still: POST /{clientId}/sender/retract removes the user's in-app notifications of the
// type (of one sub-notification with secondaryId/subNotificationId), retracts deliveries still
// pending (their job then sends nothing) and sends not processed yet, leaves what another
// channel already sent as sent, and says so in the log and the delivery events.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryTables } from '../../src/modules/delivery/delivery.tables.js';
import { logStatus } from '../../src/modules/logs/log-record.js';
import { DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import type { DeliveryRow, MessageRow, SendingTables } from '../../src/modules/sending/sending.tables.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('retract (%s)', (kind) => {
  let t: TestContext;
  let worker: DeliveryWorker;
  let closeExecutors: () => Promise<void>;
  let server: { authorization: string };
  const db = () => t.deps.db.withTables<SendingTables & DeliveryTables>();
  const retractUrl = () => `/${t.account.clientId}/sender/retract`;
  const retract = (payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url: retractUrl(), headers: server, payload });
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json<{ logs: Record<string, unknown>[] }>().logs[0];
  const deliveryOf = (trackingId: string, channel: string) => db().selectFrom('deliveries').selectAll().where('tracking_id', '=', trackingId).where('channel', '=', channel).executeTakeFirstOrThrow();
  const inappIds = async (user: string) =>
    (await db().withTables<{ inapp_notifications: { user_id: string; tracking_id: string } }>().selectFrom('inapp_notifications').select('tracking_id').where('user_id', '=', user).orderBy('tracking_id').execute()).map((r) => r.tracking_id);

  /** Sends, then routes it: the in-app notification is stored, the email delivery waits pending for its job. */
  async function sendAndRoute(user: string, extra: Record<string, unknown> = {}): Promise<string> {
    const res = await t.app.inject({
      method: 'POST',
      url: `/${t.account.clientId}/sender`,
      headers: server,
      payload: { notificationId: 'comments', user: { id: user, email: `${user}@example.com` }, email: { subject: 'New comment', html: '<p>Hi</p>' }, inapp: { title: 'New comment' }, ...extra },
    });
    expect(res.statusCode, res.body).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();
    if (extra.schedule) return trackingId;
    if (kind === 'sqlite') {
      const seqs = (await db().selectFrom('send_intake').select('seq').orderBy('seq').execute()).map((r) => r.seq);
      await worker.ingestChunks(seqs.map((seq) => ({ data: { seq }, job: { id: '', name: 'sends.ingest', attempt: 1, maxAttempts: 3 } })));
    } else {
      expect(await worker.processMessages([trackingId])).toEqual([undefined]);
    }
    expect((await deliveryOf(trackingId, 'inapp')).status).toBe('delivered');
    expect((await deliveryOf(trackingId, 'email')).status).toBe('pending');
    return trackingId;
  }

  beforeAll(async () => {
    t = await createTestContext(kind);
    server = { authorization: `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}`).toString('base64')}` };
    const built = buildExecutors(t.deps, t.services);
    closeExecutors = built.close;
    worker = new DeliveryWorker(t.deps, t.deps.queue, built.executors, t.services);
    const type = await t.app.inject({ method: 'POST', url: '/types', headers: t.auth, payload: { notificationId: 'comments', title: 'Comments', channels: ['EMAIL', 'INAPP_WEB'] } });
    expect(type.statusCode).toBe(200);
  });
  afterAll(async () => {
    await worker.close();
    await closeExecutors();
    await t.close();
  });

  it("retracts one sub-notification's sends: in-app removed, pending email never sent, the rest untouched", async () => {
    const post1 = await sendAndRoute('ada', { subNotificationId: 'post-1' });
    const post2 = await sendAndRoute('ada', { subNotificationId: 'post-2' });
    const bobs = await sendAndRoute('bob', { subNotificationId: 'post-1' });

    // secondaryId is the older name of subNotificationId.
    const res = await retract({ notificationId: 'comments', userId: 'ada', secondaryId: 'post-1' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ trackingIds: [post1], inappNotifications: 1, deliveries: 2, messages: 0 });

    expect(await inappIds('ada')).toEqual([post2]);
    expect(await inappIds('bob')).toEqual([bobs]);
    const email = await deliveryOf(post1, 'email');
    expect(email.status).toBe('retracted');
    // Its job runs and makes no provider call.
    await worker.runDelivery(email.id);
    expect((await deliveryOf(post1, 'email')).status).toBe('retracted');
    expect(await db().selectFrom('delivery_attempts').select('id').where('delivery_id', '=', email.id).execute()).toEqual([]);
    expect((await deliveryOf(post2, 'email')).status).toBe('pending');
    expect((await deliveryOf(bobs, 'email')).status).toBe('pending');

    // The log says what was retracted, and the ledger recorded each transition.
    const record = await log(post1);
    expect(record).toMatchObject({ email_retracted_at: expect.any(String) as unknown, inapp_retracted_at: expect.any(String) as unknown, inapp_delivered_at: expect.any(String) as unknown });
    const events = await db().selectFrom('delivery_events').select(['channel', 'from_state', 'to_state']).where('tracking_id', '=', post1).where('to_state', '=', 'retracted').orderBy('channel').execute();
    expect(events).toEqual([
      { channel: 'email', from_state: 'pending', to_state: 'retracted' },
      { channel: 'inapp', from_state: 'delivered', to_state: 'retracted' },
    ]);
  });

  it('leaves what another channel already sent as sent, and retracts sends not processed yet', async () => {
    const sent = await sendAndRoute('cy');
    await worker.runDelivery((await deliveryOf(sent, 'email')).id);
    expect((await deliveryOf(sent, 'email')).status).toBe('sent');
    const later = await sendAndRoute('cy', { schedule: new Date(t.deps.clock.now().getTime() + 3600_000).toISOString() });

    const res = await retract({ notificationId: 'comments', userId: 'cy' });
    expect(res.json()).toEqual({ trackingIds: [sent, later].sort(), inappNotifications: 1, deliveries: 1, messages: 1 });
    expect((await deliveryOf(sent, 'email')).status).toBe('sent');
    expect((await deliveryOf(sent, 'inapp')).status).toBe('retracted');
    expect(await inappIds('cy')).toEqual([]);
    expect(await log(sent)).toMatchObject({ email_sent_at: expect.any(String) as unknown, inapp_retracted_at: expect.any(String) as unknown });
    expect((await log(sent)).email_retracted_at).toBeUndefined();

    // The scheduled send's time comes: it makes nothing.
    expect(await worker.processMessages([later])).toEqual([undefined]);
    expect(await db().selectFrom('deliveries').select('id').where('tracking_id', '=', later).execute()).toEqual([]);
    expect(await log(later)).toMatchObject({ retracted: true });

    // Repeated, it changes nothing and is no error.
    expect((await retract({ notificationId: 'comments', userId: 'cy' })).json()).toEqual({ trackingIds: [], inappNotifications: 0, deliveries: 0, messages: 0 });
  });

  it('gives a log whose every delivery was retracted the status retracted, and one with a delivery kept its status', () => {
    const message = { state: 'processed' } as MessageRow;
    const d = (channel: string, status: DeliveryRow['status']) => ({ channel, status, routing: 'SEND' }) as DeliveryRow;
    expect(logStatus(message, [d('email', 'retracted'), d('inapp', 'retracted')])).toBe('retracted');
    expect(logStatus(message, [d('email', 'sent'), d('inapp', 'retracted')])).toBe('sent');
    expect(logStatus({ state: 'retracted' }, [])).toBe('retracted');
  });

  it('refuses bad input with the Error body, and other environments are out of reach', async () => {
    expectErrorBody(await retract({ notificationId: 'comments' }), 400, 'VALIDATION_FAILED', /userId/);
    expectErrorBody(await retract({ userId: 'ada' }), 400, 'VALIDATION_FAILED', /notificationId/);
    expectErrorBody(await retract({ notificationId: 'comments', userId: 'ada', secondaryId: 'a', subNotificationId: 'b' }), 400, 'VALIDATION_FAILED', /secondaryId/);
    expectErrorBody(await retract({ notificationId: 'comments', userId: 'ada', trackingId: 'x' }), 400, 'VALIDATION_FAILED', /trackingId/);
    const wrong = await t.app.inject({ method: 'POST', url: retractUrl(), headers: { authorization: 'Basic bm9wZTpub3Bl' }, payload: { notificationId: 'comments', userId: 'ada' } });
    expectErrorBody(wrong, 401, 'UNAUTHORIZED', /./);

    const other = await t.newAccount();
    const res = await t.app.inject({ method: 'POST', url: `/${other.clientId}/sender/retract`, headers: { authorization: `Bearer ${other.apiKey}` }, payload: { notificationId: 'comments', userId: 'ada' } });
    expect(res.json()).toEqual({ trackingIds: [], inappNotifications: 0, deliveries: 0, messages: 0 });
    expect((await inappIds('ada')).length).toBe(1);
  });
});

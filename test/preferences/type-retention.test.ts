// A type's retention (days) on both engines with a clock the test moves: the hourly purge deletes
// that type's in-app notifications and logs (messages, deliveries, attempts) once they are older
// than its retention, not a minute before; other types, and the same type id in another
// environment without a retention, keep theirs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InappTables } from '../../src/modules/inapp/inapp.repository.js';
import { DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { type Maintenance, registerMaintenanceJobs } from '../../src/modules/system/maintenance.jobs.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const DAY_MS = 24 * 3600_000;

describe.each(STORAGE_KINDS)('per-type retention (%s)', (kind) => {
  const clock = new ManualClock();
  let t: TestContext;
  let maintenance: Maintenance;
  let worker: DeliveryWorker;
  let closeExecutors: () => Promise<void>;
  let second: { authorization: string };
  const db = () => t.deps.db.withTables<SendingTables & InappTables>();

  async function send(type: string, user: string, headers = t.auth): Promise<string> {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers, payload: { type, to: { id: user }, inapp: { title: `${type} for ${user}` } } });
    expect(res.statusCode, res.body).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();
    if (kind === 'sqlite') {
      const seqs = (await db().selectFrom('send_intake').select('seq').orderBy('seq').execute()).map((r) => r.seq);
      await worker.ingestChunks(seqs.map((seq) => ({ data: { seq }, job: { id: '', name: 'sends.ingest', attempt: 1, maxAttempts: 3 } })));
    } else {
      expect(await worker.processMessages([trackingId])).toEqual([undefined]);
    }
    return trackingId;
  }

  /** What is left of a send: its message, deliveries, attempts and in-app notification. */
  async function leftOf(trackingId: string) {
    const deliveries = await db().selectFrom('deliveries').select('id').where('tracking_id', '=', trackingId).execute();
    const attempts = deliveries.length ? await db().selectFrom('delivery_attempts').select('id').where('delivery_id', 'in', deliveries.map((d) => d.id)).execute() : [];
    return {
      message: (await db().selectFrom('messages').select('tracking_id').where('tracking_id', '=', trackingId).execute()).length,
      deliveries: deliveries.length,
      attempts: attempts.length,
      inapp: (await db().selectFrom('inapp_notifications').select('tracking_id').where('tracking_id', '=', trackingId).execute()).length,
    };
  }
  const kept = { message: 1, deliveries: 1, attempts: 1, inapp: 1 };
  const gone = { message: 0, deliveries: 0, attempts: 0, inapp: 0 };

  beforeAll(async () => {
    t = await createTestContext(kind, { clock });
    maintenance = registerMaintenanceJobs(t.deps);
    const built = buildExecutors(t.deps, t.services);
    closeExecutors = built.close;
    worker = new DeliveryWorker(t.deps, t.deps.queue, built.executors, t.services);
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Second' } })).json<{ clientId: string }>();
    const key = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'second', environmentId: env.clientId } })).json<{ key: string }>();
    second = { authorization: `Bearer ${key.key}` };
    for (const [type, retention, headers] of [['chatty', 2, t.auth], ['plain', null, t.auth], ['chatty', null, second]] as const) {
      const res = await t.app.inject({ method: 'POST', url: '/types', headers, payload: { notificationId: type, title: type, channels: ['INAPP_WEB'], retention } });
      expect(res.statusCode, res.body).toBe(200);
    }
  });
  afterAll(async () => {
    await worker.close();
    await closeExecutors();
    await t.close();
  });

  it("purges the type's in-app notifications and logs after its retention, and nothing else", async () => {
    const chatty = await send('chatty', 'ada');
    const plain = await send('plain', 'ada');
    const elsewhere = await send('chatty', 'ada', second);
    for (const id of [chatty, plain, elsewhere]) expect(await leftOf(id)).toEqual(kept);

    clock.advance(2 * DAY_MS - 60_000);
    await maintenance.purge();
    expect(await leftOf(chatty)).toEqual(kept);

    clock.advance(2 * 60_000);
    await maintenance.purge();
    expect(await leftOf(chatty)).toEqual(gone);
    expect(await leftOf(plain)).toEqual(kept);
    expect(await leftOf(elsewhere)).toEqual(kept);
    // The in-app client no longer lists it; the log is gone.
    const listed = await t.app.inject({ method: 'GET', url: '/user/inapp?userId=ada', headers: t.auth });
    expect(listed.json<{ notifications: { id: string }[] }>().notifications.map((n) => n.id)).toEqual([plain]);
    expect((await t.app.inject({ method: 'GET', url: `/logs/${chatty}`, headers: t.auth })).json<{ logs: unknown[] }>().logs).toEqual([]);
  });
});

// A batch of messages is routed together: their state changes and deliveries are written with a
// few statements for the batch, and no delivery job (the routing job makes the first attempts);
// in-app deliveries are made in the same transaction, one INSERT for the batch; should that
// fail, each message is written alone.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LedgerSession } from '../../src/modules/delivery/ledger.js';
import { InappRepository } from '../../src/modules/inapp/inapp.repository.js';
import { DELIVER_JOB, DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import type { DeliveryTables } from '../../src/modules/delivery/delivery.tables.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { sendEmails } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('routing a batch of messages (%s)', (kind) => {
  let t: TestContext;
  beforeEach(async () => {
    // No workers: the test routes the sends itself.
    t = await createTestContext(kind);
  });
  afterEach(() => t.close());
  const db = () => t.deps.db.withTables<SendingTables & DeliveryTables>();
  /** Delivery jobs enqueued while routing, by delivery id: none is (the routing job makes the first attempts). */
  let enqueued: string[] = [];
  beforeEach(() => {
    enqueued = [];
    const queue = t.deps.queue;
    const [enqueue, enqueueMany] = [queue.enqueue.bind(queue), queue.enqueueMany.bind(queue)];
    queue.enqueue = (tx, name, data, options) => {
      if (name === DELIVER_JOB) enqueued.push((data as { deliveryId: string }).deliveryId);
      return enqueue(tx, name, data, options);
    };
    queue.enqueueMany = async (tx, jobs) => {
      const ids = await enqueueMany(tx, jobs);
      for (const job of jobs) if (job.name === DELIVER_JOB) enqueued.push((job.data as { deliveryId: string }).deliveryId);
      return ids;
    };
  });

  /** Three in-app sends of `type`, one per user, answered 200; their trackingIds in order. */
  async function sendInapp(type: string): Promise<string[]> {
    const trackingIds: string[] = [];
    for (const i of [0, 1, 2]) {
      const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type, to: { id: `${type}${i}` }, inapp: { title: `Hello ${i}` } } });
      expect(res.statusCode).toBe(200);
      trackingIds.push(res.json<{ trackingId: string }>().trackingId);
    }
    return trackingIds;
  }

  async function sendAndRoute(type: string, send = (kind: string) => sendEmails(t, kind, [0, 1, 2].map((i) => `${kind}${i}@example.com`))): Promise<string[]> {
    const trackingIds = await send(type);
    const { executors, close } = buildExecutors(t.deps, t.services);
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
    try {
      if (kind === 'sqlite') {
        const seqs = (await db().selectFrom('send_intake').select('seq').orderBy('seq').execute()).map((r) => r.seq);
        const results = await worker.ingestChunks(seqs.map((seq) => ({ data: { seq }, job: { id: '', name: 'sends.ingest', attempt: 1, maxAttempts: 3 } })));
        expect(results.every((r) => r === undefined)).toBe(true);
      } else {
        expect(await worker.processMessages(trackingIds)).toEqual([undefined, undefined, undefined]);
      }
    } finally {
      await worker.close();
      await close();
    }
    return trackingIds;
  }

  async function expectRouted(trackingIds: string[]): Promise<void> {
    const messages = await db().selectFrom('messages').select(['tracking_id', 'state', 'processed_at']).where('tracking_id', 'in', trackingIds).execute();
    expect(messages.map((m) => m.state)).toEqual(['processed', 'processed', 'processed']);
    const deliveries = await db().selectFrom('deliveries').select(['id', 'tracking_id', 'status', 'attempts']).where('tracking_id', 'in', trackingIds).execute();
    expect(deliveries.map((d) => d.tracking_id).sort()).toEqual([...trackingIds].sort());
    expect(deliveries.every((d) => d.status === 'pending')).toBe(true);
    expect(deliveries.every((d) => d.attempts === 0)).toBe(true);
    expect(enqueued).toEqual([]);
    // Per message, in order: queued -> processed, then its delivery new -> pending.
    const events = await db().selectFrom('delivery_events').select(['tracking_id', 'kind', 'from_state', 'to_state', 'id']).where('tracking_id', 'in', trackingIds).orderBy('id').execute();
    for (const trackingId of trackingIds) {
      expect(events.filter((e) => e.tracking_id === trackingId).map((e) => `${e.kind} ${e.from_state ?? 'new'} -> ${e.to_state}`)).toEqual(['message queued -> processed', 'delivery new -> pending']);
    }
  }

  it('writes the state, deliveries and events of every message', async () => {
    await expectRouted(await sendAndRoute('together'));
  });

  /** The batch's INSERT of deliveries (rows of several messages) fails once; a message's own succeeds. */
  function failBatchDeliveriesInsert() {
    const { insertDeliveries } = LedgerSession.prototype as { insertDeliveries: (this: LedgerSession, ...args: Parameters<LedgerSession['insertDeliveries']>) => Promise<void> };
    let failed = 0;
    const spy = vi.spyOn(LedgerSession.prototype, 'insertDeliveries').mockImplementation(function (this: LedgerSession, rows, attempts) {
      if (new Set(rows.map((r) => r.tracking_id)).size > 1 && failed++ === 0) return Promise.reject(new Error('the batch INSERT failed'));
      return insertDeliveries.call(this, rows, attempts);
    });
    return { failed: () => failed, restore: () => spy.mockRestore() };
  }

  it('writes each message alone when writing the batch together fails', async () => {
    const failing = failBatchDeliveriesInsert();
    try {
      await expectRouted(await sendAndRoute('alone'));
      expect(failing.failed()).toBe(1);
    } finally {
      failing.restore();
    }
  });

  /** Rows each call of InappRepository.insertManyIfAbsent was given; `failFirstBatch`: the first call with several rows fails. */
  function watchInappInserts(failFirstBatch = false) {
    const { insertManyIfAbsent } = InappRepository.prototype as { insertManyIfAbsent: (this: InappRepository, ...args: Parameters<InappRepository['insertManyIfAbsent']>) => Promise<Set<string>> };
    const calls: string[][] = [];
    let failed = 0;
    const spy = vi.spyOn(InappRepository.prototype, 'insertManyIfAbsent').mockImplementation(function (this: InappRepository, rows) {
      calls.push(rows.map((r) => r.tracking_id));
      if (failFirstBatch && rows.length > 1 && failed++ === 0) return Promise.reject(new Error('the batch INSERT failed'));
      return insertManyIfAbsent.call(this, rows);
    });
    return { calls, failed: () => failed, restore: () => spy.mockRestore() };
  }

  /** Every in-app send is stored, delivered with one successful attempt, and its events are in order. */
  async function expectDeliveredInapp(trackingIds: string[]): Promise<void> {
    const messages = await db().selectFrom('messages').select(['tracking_id', 'state']).where('tracking_id', 'in', trackingIds).orderBy('tracking_id').execute();
    expect(messages.map((m) => m.state)).toEqual(['processed', 'processed', 'processed']);
    const stored = await t.deps.db.selectFrom('inapp_notifications' as never).select(['tracking_id', 'title'] as never).where('tracking_id' as never, 'in', trackingIds as never).execute() as { tracking_id: string; title: string }[];
    expect(stored.map((n) => `${n.tracking_id} ${n.title}`).sort()).toEqual(trackingIds.map((id, i) => `${id} Hello ${i}`).sort());
    const deliveries = await db().selectFrom('deliveries').select(['id', 'tracking_id', 'status', 'attempts', 'provider_message_id']).where('tracking_id', 'in', trackingIds).execute();
    expect(deliveries.map((d) => `${d.tracking_id} ${d.status} ${d.attempts} ${d.provider_message_id}`).sort()).toEqual(trackingIds.map((id) => `${id} delivered 1 ${id}`).sort());
    const attempts = await db().selectFrom('delivery_attempts').select(['delivery_id', 'outcome']).where('delivery_id', 'in', deliveries.map((d) => d.id)).execute();
    expect(attempts.map((a) => a.outcome)).toEqual(['success', 'success', 'success']);
    expect(enqueued).toEqual([]);
    const events = await db().selectFrom('delivery_events').select(['tracking_id', 'kind', 'from_state', 'to_state', 'id']).where('tracking_id', 'in', trackingIds).orderBy('id').execute();
    const each = trackingIds.map((id) => events.filter((e) => e.tracking_id === id).map((e) => `${e.kind} ${e.from_state ?? 'new'} -> ${e.to_state}`));
    expect(each[0][0]).toBe('message queued -> processed');
    expect(each[0].at(-1)).toBe('delivery pending -> delivered');
    expect(each[1]).toEqual(each[0]);
    expect(each[2]).toEqual(each[0]);
  }

  it('stores the in-app deliveries of a batch with one INSERT, each with its attempt and events', async () => {
    const inserts = watchInappInserts();
    try {
      const trackingIds = await sendAndRoute('inapp_together', sendInapp);
      expect(inserts.calls).toEqual([trackingIds]);
      await expectDeliveredInapp(trackingIds);
    } finally {
      inserts.restore();
    }
  });

  it('stores each in-app delivery alone when the batch\'s deliveries INSERT fails after the notifications were stored', async () => {
    // The batch's notifications are written, then rolled back with its savepoint: each message is
    // delivered again alone, from its delivery as planned (not as the rolled-back batch left it).
    const failing = failBatchDeliveriesInsert();
    const inserts = watchInappInserts();
    try {
      const trackingIds = await sendAndRoute('inapp_rolled_back', sendInapp);
      expect(failing.failed()).toBe(1);
      expect(inserts.calls).toEqual([trackingIds, ...trackingIds.map((id) => [id])]);
      await expectDeliveredInapp(trackingIds);
    } finally {
      inserts.restore();
      failing.restore();
    }
  });

  it('stores each in-app delivery alone when the batch INSERT fails', async () => {
    const inserts = watchInappInserts(true);
    try {
      const trackingIds = await sendAndRoute('inapp_alone', sendInapp);
      expect(inserts.failed()).toBe(1);
      expect(inserts.calls).toEqual([trackingIds, ...trackingIds.map((id) => [id])]);
      await expectDeliveredInapp(trackingIds);
    } finally {
      inserts.restore();
    }
  });
});

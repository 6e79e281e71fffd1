// Deduplication inside one routing batch, on both engines: identical sends whose own times span
// more than one window are routed together (one processMessages call), and each window delivers
// its first send only. The claims of a batch are made in rounds (send-gates.ts): this is the case
// that needs a second round, with a window claimed by the first round ending inside the batch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { routed } from '../helpers/gated-sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('deduplication of one batch (%s)', (kind) => {
  let t: TestContext;
  const start = new Date('2026-05-01T12:00:00.000Z');
  const clock = new ManualClock(start);
  const at = (seconds: number) => new Date(start.getTime() + 3600_000 + seconds * 1000).toISOString();

  beforeAll(async () => {
    // No workers: the test routes the sends itself, all in one batch.
    t = await createTestContext(kind, { clock });
    const res = await t.app.inject({ method: 'POST', url: '/types', headers: t.auth, payload: { notificationId: 'windowed', title: 'windowed', channels: ['INAPP_WEB'], deduplication: { duration: 60 } } });
    expect(res.statusCode, res.body).toBe(200);
  });
  afterAll(() => t.close());

  it('delivers the first send of each window when identical sends of one batch span two windows', async () => {
    // Scheduled, so each send's own time is its schedule: windows [0 s, 60 s) and [61 s, 121 s).
    const schedules = [0, 30, 61, 90, 59];
    const ids: string[] = [];
    for (const seconds of schedules) {
      const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'windowed', to: { id: 'ada' }, inapp: { title: 'Same' }, schedule: at(seconds) } });
      expect(res.statusCode, res.body).toBe(200);
      ids.push(res.json<{ trackingId: string }>().trackingId);
    }
    clock.set(new Date(at(200)));
    const { executors, close } = buildExecutors(t.deps, t.services);
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
    try {
      expect(await worker.processMessages(ids)).toEqual(ids.map(() => undefined));
    } finally {
      await worker.close();
      await close();
    }
    const messages = await routed(t.deps, ids);
    const byId = new Map(messages.map((m) => [m.trackingId, m]));
    expect(ids.map((id) => (byId.get(id)!.delivered > 0 ? 'delivered' : byId.get(id)!.skipped.inapp))).toEqual(['delivered', 'DEDUPLICATED', 'delivered', 'DEDUPLICATED', 'DEDUPLICATED']);
    // The window held now is the one the third send claimed, until 121 s.
    const holder = (await t.deps.db.selectFrom('dedup_keys' as never).select(['tracking_id' as never, 'expires_at' as never]).executeTakeFirstOrThrow()) as { tracking_id: string; expires_at: string };
    expect(holder).toEqual({ tracking_id: ids[2], expires_at: at(121) });
  });
});

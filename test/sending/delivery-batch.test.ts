// Deliveries run in batches (DeliveryRuns): one batch with a success, a temporary and a permanent
// failure ends each delivery as a job of its own would.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RetryJobError } from '../../src/queue/port.js';
import { DeliveryError } from '../../src/channels/types.js';
import { MAX_PROVIDER_RETRY_AFTER_MS } from '../../src/modules/sending/retry-schedule.js';
import { DeliveryRuns } from '../../src/modules/sending/delivery-runs.js';
import { DELIVER_JOB, DeliveryWorker, MAX_DELIVERY_ATTEMPTS } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { sendEmails } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import type { DeliveryTables } from '../../src/modules/delivery/delivery.tables.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';

describe.each(STORAGE_KINDS)('a batch of deliveries (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  beforeAll(async () => {
    smtp = await startSmtpPeer({ reject: { 'bounce@example.com': 550, 'later@example.com': 451 } });
    // No workers: the test routes the sends and runs the batch itself.
    t = await createTestContext(kind, { config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
  });
  afterAll(async () => {
    await t.close();
    await smtp.close();
  });
  const db = () => t.deps.db.withTables<SendingTables & DeliveryTables>();
  /** Routes the sends as the queue would (SQLite: the intake journal's chunks; PostgreSQL: message.process). */
  const route = async (worker: DeliveryWorker, trackingIds: string[]) => {
    if (kind === 'sqlite') {
      for (const { seq } of await db().selectFrom('send_intake').select('seq').orderBy('seq').execute()) await worker.ingestSends(seq);
    } else {
      for (const trackingId of trackingIds) await worker.processMessage(trackingId);
    }
  };
  const countEvents = async () => Number((await db().selectFrom('delivery_events').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);

  it('sends every delivery of the batch; each one retries, fails or succeeds alone', async () => {
    const to = ['ok@example.com', 'later@example.com', 'bounce@example.com'];
    const trackingIds = await sendEmails(t, 'batch', to);
    const { executors, close } = buildExecutors(t.deps, t.services);
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
    try {
      await route(worker, trackingIds);
      const deliveries = await db().selectFrom('deliveries').select(['id', 'tracking_id']).where('tracking_id', 'in', trackingIds).execute();
      const ids = trackingIds.map((trackingId) => deliveries.find((d) => d.tracking_id === trackingId)?.id ?? '');
      const eventsBefore = await countEvents();

      const job = (id: string) => ({ id, name: DELIVER_JOB, attempt: 1, maxAttempts: MAX_DELIVERY_ATTEMPTS + 2 });
      const runs = new DeliveryRuns(t.deps, executors, t.services.users, { retryBaseMs: 10 });
      const results = await runs.run(ids.map((deliveryId) => ({ data: { deliveryId }, job: job(deliveryId) })));

      expect(results[0]).toBeUndefined();
      expect(results[1]).toBeInstanceOf(RetryJobError);
      expect((results[1] as RetryJobError).delayMs).toBeGreaterThanOrEqual(0);
      expect(results[2]).toBeUndefined();
      const rows = await db().selectFrom('deliveries').select(['id', 'status', 'attempts', 'failed_code']).where('id', 'in', ids).execute();
      const [ok, later, bounce] = ids.map((id) => rows.find((r) => r.id === id));
      expect(ok).toMatchObject({ status: 'sent', attempts: 1 });
      expect(later).toMatchObject({ status: 'pending', attempts: 1 });
      expect(bounce).toMatchObject({ status: 'failed', attempts: 1, failed_code: 'SMTP_RECIPIENT_REJECTED' });
      const attempts = await db().selectFrom('delivery_attempts').select(['delivery_id', 'outcome']).where('delivery_id', 'in', ids).execute();
      expect(ids.map((id) => attempts.filter((a) => a.delivery_id === id).map((a) => a.outcome))).toEqual([['success'], ['retry'], ['failed']]);
      // Two transitions (pending -> sent, pending -> failed); a retry is none.
      expect((await countEvents()) - eventsBefore).toBe(2);
      // The hard bounce suppressed its recipient's email.
      const bounced = (await t.app.inject({ method: 'GET', url: '/users/batch2', headers: t.auth })).json<{ emailSuppressionStatus?: { reason: string } }>();
      expect(bounced.emailSuppressionStatus?.reason).toBe('Bounce');
      expect(smtp.messages.map((m) => m.envelope.to[0])).toEqual(['ok@example.com']);

      // The batch again (a redelivered job): settled deliveries are left alone, the pending one is tried again.
      const again = await runs.run(ids.map((deliveryId) => ({ data: { deliveryId }, job: { ...job(deliveryId), attempt: 2 } })));
      expect(again[0]).toBeUndefined();
      expect(again[1]).toBeInstanceOf(RetryJobError);
      expect(again[2]).toBeUndefined();
      const retried = await db().selectFrom('deliveries').select(['status', 'attempts']).where('id', '=', ids[1] ?? '').executeTakeFirst();
      expect(retried).toMatchObject({ status: 'pending', attempts: 2 });
      expect(smtp.messages).toHaveLength(1);
    } finally {
      await worker.close();
      await close();
    }
  });
  it("puts a delivery off by the provider's Retry-After, an hour at most", async () => {
    const [trackingId] = await sendEmails(t, 'later', ['slow@example.com']);
    const { executors, close } = buildExecutors(t.deps, t.services);
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
    try {
      await route(worker, [trackingId]);
      const { id } = await db().selectFrom('deliveries').select('id').where('tracking_id', '=', trackingId).executeTakeFirstOrThrow();
      // A provider that says Retry-After: 999999999 (FCM did, in an audit: the retry was due in 2058).
      const saysLater = { ...executors, EMAIL: { ...executors.EMAIL!, deliver: () => Promise.reject(new DeliveryError('RATE_LIMITED', 'busy', { retryable: true, retryAfterMs: 999_999_999_000 })) } };
      const runs = new DeliveryRuns(t.deps, saysLater, t.services.users, { retryBaseMs: 10 });
      const [result] = await runs.run([{ data: { deliveryId: id }, job: { id, name: DELIVER_JOB, attempt: 1, maxAttempts: MAX_DELIVERY_ATTEMPTS + 2 } }]);
      expect(result).toBeInstanceOf(RetryJobError);
      expect((result as RetryJobError).delayMs).toBe(MAX_PROVIDER_RETRY_AFTER_MS);
    } finally {
      await worker.close();
      await close();
    }
  });
});

// A message whose processing fails for good ends failed in its log, with a code and the reason,
// instead of staying queued once the queue gives its job up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { startWorkers } from '../../src/workers.js';
import { DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import { INGEST_SENDS_JOB } from '../../src/modules/sending/messages.journal.js';
import { MessagesRepository } from '../../src/modules/sending/messages.repository.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import type { QueueJobsTable } from '../../src/queue/sqlite-queue.js';

describe.each(STORAGE_KINDS)('final failure of a message (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    // Job retries after 1-2 ms, so a job reaches its last attempt at once.
    t = await createTestContext(kind, { workers: true, queue: { backoff: { baseMs: 2, capMs: 2 } } });
  });
  afterAll(() => t.close());

  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0];

  it('records PROCESSING_FAILED and the reason when processing throws on every attempt', async () => {
    const inapp = t.workers!.executors.INAPP_WEB!;
    const preview = inapp.preview.bind(inapp);
    // A dependency of processing that fails every time (not a render error, which fails one channel).
    inapp.preview = (content) => {
      if (String(content.title).startsWith('broken')) throw new Error('preview exploded');
      return preview(content);
    };
    try {
      const sends = await Promise.all(
        ['broken one', 'fine', 'broken two'].map((title) =>
          t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'final_failure', to: { id: 'ff-user' }, inapp: { title } } }),
        ),
      );
      for (const res of sends) expect(res.statusCode).toBe(200);
      const [broken1, fine, broken2] = sends.map((r) => r.json().trackingId as string);

      for (const trackingId of [broken1, broken2]) {
        const record = await eventually(async () => {
          const l = await log(trackingId);
          return l?.failed_at ? l : undefined;
        }, 20_000, `final failure of ${trackingId}`);
        expect(record.failed_code).toBe('PROCESSING_FAILED');
        expect(record.failed_internal).toContain('preview exploded');
        expect(record.inapp_sent_at).toBeUndefined();
      }
      const ok = await eventually(async () => {
        const l = await log(fine);
        return l?.inapp_delivered_at ? l : undefined;
      }, 20_000, 'the good message delivered');
      expect(ok.failed_code).toBeUndefined();
    } finally {
      inapp.preview = preview;
    }
  });
});

// The embedded queue: a job whose worker died on its last attempt (kill -9, out of memory) is
// handed over with its attempts used up, and the runner fails it for good through the job's
// onFailed: no handler saw a failure, and what the job stood for ends failed all the same.
describe('final failure when the worker died on the last attempt (sqlite)', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext('sqlite', { config: { jobLockSeconds: 1 } });
  });
  afterAll(() => t.close());

  const db = () => t.deps.db.withTables<{ queue_jobs: QueueJobsTable } & SendingTables>();
  /** Leaves these jobs as a worker killed during their last attempt would: running, attempts used up, lock expired. */
  async function abandonOnLastAttempt(jobs: { id: string; max_attempts: number }[]): Promise<void> {
    const past = new Date(Date.now() - 60_000).toISOString();
    for (const job of jobs) {
      await db().updateTable('queue_jobs').set({ state: 'running', attempt: job.max_attempts, locked_by: 'dead-worker', locked_until: past }).where('id', '=', job.id).execute();
    }
  }
  /** The send's log record once `field` is set. */
  const loggedWith = (trackingId: string, field: string) =>
    eventually(async () => {
      const l = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0];
      return l?.[field] ? l : undefined;
    }, 20_000, field);
  const send = async (payload: object) => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload });
    expect(res.statusCode).toBe(200);
    return res.json().trackingId as string;
  };

  it('a send (its ingest job): stored, and logged PROCESSING_FAILED with the reason', async () => {
    const trackingId = await send({ type: 'lost_worker', to: { id: 'lw-user' }, inapp: { title: 'hello' } });
    const jobs = await eventually(async () => {
      const rows = await db().selectFrom('queue_jobs').selectAll().where('state', '=', 'waiting').execute();
      return rows.length ? rows : undefined;
    }, 10_000, "the send's job");
    await abandonOnLastAttempt(jobs);
    t.workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10 });
    const record = await loggedWith(trackingId, 'failed_at');
    expect(record.failed_code).toBe('PROCESSING_FAILED');
    expect(record.failed_internal).toContain('worker lost');
    await t.workers.stop();
    t.workers = undefined;
  });

  it('a delivery whose first attempt was left to a job given up: the channel logged failed with PROCESSING_FAILED instead of pending forever', async () => {
    const trackingId = await send({ type: 'lost_delivery', to: { id: 'ld-user', email: 'ld@example.com' }, email: { subject: 'Hi', html: '<p>hi</p>' } });
    // What a worker killed after routing the send leaves: the message stored and processed, its
    // email delivery pending with no attempt, the journal chunk and its ingest job still there.
    const { executors, close } = buildExecutors(t.deps, t.services);
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
    try {
      const repo = new MessagesRepository(t.deps.db);
      const chunk = await db().selectFrom('send_intake').select('seq').executeTakeFirstOrThrow();
      await repo.insertMessagesIfAbsent((await repo.pendingChunk(chunk.seq))!);
      expect(await worker.processMessages([trackingId])).toEqual([undefined]);
    } finally {
      await worker.close();
      await close();
    }
    expect(await db().selectFrom('deliveries').select(['status', 'attempts']).where('tracking_id', '=', trackingId).execute()).toEqual([{ status: 'pending', attempts: 0 }]);
    await abandonOnLastAttempt([await db().selectFrom('queue_jobs').selectAll().where('name', '=', INGEST_SENDS_JOB).where('state', '=', 'waiting').executeTakeFirstOrThrow()]);
    t.workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10 });
    const record = await loggedWith(trackingId, 'email_failed_at');
    expect(record.email_failed_code).toBe('PROCESSING_FAILED');
    expect(record.email_failed_internal).toContain('worker lost');
    expect(record.email_sent_at).toBeUndefined();
  });
});

// PostgreSQL: the immediate sends of a group commit share one message.process job per 16 (a job
// row per send was about a third of PostgreSQL's CPU per accepted send); a scheduled send keeps
// its own job, whose schedule can move alone. The worker routes a chunk as it routes a batch of
// single jobs: once per message, a failing message sending the chunk's job back for itself only.
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import { DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { type IntakeUnit, SendIntake } from '../../src/modules/sending/intake.js';
import type { ProcessMessageJobData } from '../../src/modules/sending/messages.repository.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { parseRecipient } from '../../src/modules/users/users.service.js';
import type { JobContext } from '../../src/queue/port.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { queuedMessageRow } from '../helpers/rows.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

// The PostgreSQL tier (the global setup prints why it is skipped when DATABASE_URL is not set).
describe.skipIf(!STORAGE_KINDS.includes('postgres'))('message.process jobs per chunk (postgres)', () => {
  const kind = 'postgres';
  let t: TestContext;
  beforeEach(async () => {
    t = await createTestContext(kind);
  });
  afterEach(() => t.close());

  const now = new Date().toISOString();
  const unit = (trackingId: string, options: { runAt?: Date; request?: string } = {}): IntakeUnit => {
    const { accountId, clientId: envId } = t.account;
    const to = { id: `user-${trackingId}` };
    return {
      accountId,
      envId,
      now,
      idempotency: null,
      usage: { cycleStart: '2026-01-01T00:00:00.000Z', cap: 1000 },
      recipient: parseRecipient(to),
      ensureType: 'chunked',
      job: { name: 'message.process', data: { trackingId }, runAt: options.runAt ?? null },
      message: queuedMessageRow({
        tracking_id: trackingId,
        account_id: accountId,
        env_id: envId,
        notification_id: 'chunked',
        user_id: to.id,
        request: options.request ?? JSON.stringify({ type: 'chunked', to, inapp: { title: `hi ${trackingId}` } }),
        received_at: now,
        ...(options.runAt ? { state: 'scheduled', scheduled_for: options.runAt.toISOString() } : {}),
      }),
    };
  };
  /** The queue's message.process jobs: id as the queue names it, and data. */
  const processJobs = async () => {
    const { rows: schema } = await sql<{ s: string }>`select current_schema() as s`.execute(t.deps.db);
    const { rows } = await sql<{ id: string; data: ProcessMessageJobData }>`select id::text, data from ${sql.table(`${schema[0].s}_boss.job`)} where name = 'message.process' order by created_on, id`.execute(t.deps.db);
    return rows.map((r) => ({ id: `message.process:${r.id}`, data: r.data }));
  };
  const messages = () => t.deps.db.withTables<SendingTables>().selectFrom('messages').select(['tracking_id', 'state', 'job_id']).orderBy('tracking_id').execute();
  const notifications = async () => Number(((await sql<{ n: number }>`select count(*)::int as n from inapp_notifications`.execute(t.deps.db)).rows[0]).n);
  const job = (attempt: number): JobContext => ({ id: 'chunk', name: 'message.process', attempt, maxAttempts: 3 });
  const ids = (n: number, from = 1) => Array.from({ length: n }, (_, i) => `t-${String(from + i).padStart(2, '0')}`);

  it('gives the immediate sends of one group commit a job per 16, and a scheduled send its own', async () => {
    const later = new Date(Date.now() + 3_600_000);
    const outcomes = await new SendIntake(t.deps, t.deps.queue).accept([...ids(34).map((id) => unit(id)), unit('t-99', { runAt: later })]);
    expect(outcomes.every((o) => o.ok && o.value === 'ok')).toBe(true);

    const jobs = await processJobs();
    const chunks = [ids(16), ids(16, 17), ids(2, 33)];
    expect(jobs.map((j) => j.data).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual([{ trackingId: 't-99' }, ...chunks.map((c) => ({ trackingIds: c }))]);
    const rows = await messages();
    const jobOf = (data: object) => jobs.find((j) => JSON.stringify(j.data) === JSON.stringify(data))!.id;
    expect(rows.map((r) => r.job_id)).toEqual([...chunks.flatMap((c) => c.map(() => jobOf({ trackingIds: c }))), jobOf({ trackingId: 't-99' })]);
    expect(rows.at(-1)!.state).toBe('scheduled');
  });

  it('routes a chunk once per message; a message failing alone sends the job back for itself, and ends failed on the last attempt', async () => {
    await new SendIntake(t.deps, t.deps.queue).accept([unit('t-01'), unit('t-02', { request: '{"not json' }), unit('t-03')]);
    const [chunk] = await processJobs();
    expect(chunk.data).toEqual({ trackingIds: ['t-01', 't-02', 't-03'] });
    const { executors, close } = buildExecutors(t.deps, t.services);
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
    try {
      const [first] = await worker.processMessageJobs([{ data: chunk.data, job: job(1) }]);
      expect(first).toBeInstanceOf(Error);
      expect((await messages()).map((m) => [m.tracking_id, m.state])).toEqual([
        ['t-01', 'processed'],
        ['t-02', 'queued'],
        ['t-03', 'processed'],
      ]);
      expect(await notifications()).toBe(2);

      // The last attempt: the others are not routed again; the failing one is recorded, and
      // the chunk's job completes (its onFailed would fail its other messages' pending deliveries).
      expect(await worker.processMessageJobs([{ data: chunk.data, job: job(3) }])).toEqual([undefined]);
      expect((await messages()).map((m) => [m.tracking_id, m.state])).toEqual([
        ['t-01', 'processed'],
        ['t-02', 'failed'],
        ['t-03', 'processed'],
      ]);
      expect(await notifications()).toBe(2);
    } finally {
      await worker.close();
      await close();
    }
  });
});

import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type SQLite from 'better-sqlite3';
import { type Kysely, sql } from 'kysely';
import { uuidv7 } from 'uuidv7';
import { type Clock, type Ids, systemClock } from '../clock.js';
import { heldSqlite } from '../storage/db.js';
import { type BatchJobHandler, type BatchWorkOptions, type EnqueueOptions, type JobHandler, type JobToEnqueue, type Queue, type QueueDepth, type WorkOptions, keyedJobId, type JobDb } from './port.js';
import { type BackoffOptions, type ClaimedJob, type GraceTimer, type JobBackend, JobRunner, type QueueLogger } from './runner.js';

/** Row of the queue_jobs table (migration 0020_queue). Timestamps are ISO-8601 UTC text. */
export interface QueueJobsTable {
  id: string;
  name: string;
  data: string;
  state: 'waiting' | 'running' | 'done' | 'failed' | 'cancelled';
  run_at: string;
  attempt: number;
  max_attempts: number;
  locked_by: string | null;
  locked_until: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}
export interface QueueTables {
  queue_jobs: QueueJobsTable;
}

export interface CommonQueueOptions {
  /** Run times, retries and locks of the SQLite queue; pg-boss reads the server's now() instead. */
  clock?: Clock;
  ids?: Ids;
  logger?: QueueLogger;
  /** Poll when nothing nudged the worker. Default 250 ms (SQLite), 1000 ms (PostgreSQL). */
  pollIntervalMs?: number;
  /** A running job whose lock is not renewed for this long is taken over. Default 30 s. */
  lockMs?: number;
  /** Lock renewal period while a handler runs. Default lockMs / 3. */
  heartbeatMs?: number;
  /** stop() waits this long for running handlers before releasing their jobs. Default 10 s. */
  graceMs?: number;
  /** Waits out that grace period (tests end it by hand). Default: a real timer. */
  graceTimer?: GraceTimer;
  /** Default runs per job when enqueue() gives none. Default 10. */
  maxAttempts?: number;
  backoff?: BackoffOptions;
  /** Source of the backoff jitter (tests). */
  random?: () => number;
  /** While true (the API in the same process is busy), runs are spaced to take about busyShare of the time. */
  busy?: () => boolean;
  /** Share of the time job runs may take while busy (see BusyGate). Default 0.1. */
  busyShare?: number;
}

export interface SqliteQueueOptions extends CommonQueueOptions {
  /** The connection under the queue's Kysely, for enqueueMany's prepared insert inside a transaction. */
  sqlite?: SQLite.Database;
  /** Done and cancelled jobs are deleted after this long. Default 1 h. */
  keepDoneMs?: number;
  /** Failed jobs are deleted after this long. Default 7 days. */
  keepFailedMs?: number;
  /** How often the purge runs. Default 5 min. */
  purgeIntervalMs?: number;
}

const uuidIds: Ids = { uuid: () => uuidv7() };
/** Jobs per INSERT of enqueueMany (9 parameters each, well under SQLite's limit). */
const ROWS_PER_INSERT = 500;

export function resolveMaxAttempts(value: number | undefined, fallback: number): number {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`queue: maxAttempts must be an integer >= 1 (got ${n})`);
  return n;
}

/**
 * The embedded durable queue: jobs live in the application's SQLite database, so enqueue() is an
 * INSERT that commits or rolls back with the caller's transaction. A claim is one
 * UPDATE ... RETURNING (SQLite has a single writer, so two workers never claim the same job);
 * the claim sets a lock (locked_by, locked_until) renewed while the handler runs, so another
 * process takes a job over once its worker died and the lock expired.
 */
export class SqliteQueue implements Queue, JobBackend {
  private readonly runner: JobRunner;
  private readonly clock: Clock;
  private readonly ids: Ids;
  private readonly lockMs: number;
  private readonly workerId = `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private purgeTimer: NodeJS.Timeout | null = null;
  /** When claim() last looked for expired locks, per job name. */
  private readonly expiredLookedAt = new Map<string, number>();

  constructor(
    private readonly db: JobDb,
    private readonly options: SqliteQueueOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.ids = options.ids ?? uuidIds;
    this.lockMs = options.lockMs ?? 30_000;
    this.runner = new JobRunner(this, {
      pollIntervalMs: options.pollIntervalMs ?? 250,
      heartbeatMs: options.heartbeatMs ?? Math.max(10, Math.floor(this.lockMs / 3)),
      graceMs: options.graceMs ?? 10_000,
      graceTimer: options.graceTimer,
      backoff: options.backoff,
      random: options.random,
      logger: options.logger,
      busy: options.busy,
      busyShare: options.busyShare,
    });
  }

  private jobs(db: JobDb): Kysely<QueueTables> {
    return db as Kysely<QueueTables>;
  }

  private now(offsetMs = 0): string {
    return new Date(this.clock.now().getTime() + offsetMs).toISOString();
  }

  async enqueue<T>(tx: JobDb, name: string, data: T, options: EnqueueOptions = {}): Promise<string> {
    const id = options.key === undefined ? this.ids.uuid() : keyedJobId(name, options.key);
    const now = this.now();
    await this.jobs(tx)
      .insertInto('queue_jobs')
      .values({
        id,
        name,
        data: JSON.stringify(data ?? null),
        state: 'waiting',
        run_at: (options.runAt ?? this.clock.now()).toISOString(),
        attempt: 0,
        max_attempts: resolveMaxAttempts(options.maxAttempts, this.options.maxAttempts ?? 10),
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    // On the same Kysely the claim waits for the connection until the caller's transaction ends,
    // so the nudge sees the job once committed; on another connection the next poll does.
    this.runner.nudge(name);
    return id;
  }

  async enqueueMany(tx: JobDb, jobs: JobToEnqueue[]): Promise<string[]> {
    const now = this.now();
    const rows = jobs.map(({ name, data, options = {} }) => ({
      id: options.key === undefined ? this.ids.uuid() : keyedJobId(name, options.key),
      name,
      data: JSON.stringify(data ?? null),
      state: 'waiting' as const,
      run_at: (options.runAt ?? this.clock.now()).toISOString(),
      attempt: 0,
      max_attempts: resolveMaxAttempts(options.maxAttempts, this.options.maxAttempts ?? 10),
      created_at: now,
      updated_at: now,
    }));
    const held = heldSqlite(tx, this.options.sqlite);
    if (held) {
      // A prepared statement per job: for a group commit's few jobs, cheaper than building and
      // compiling one multi-row INSERT with Kysely (measured, issue 11).
      const insert = held.prepare(
        `INSERT INTO queue_jobs (id, name, data, state, run_at, attempt, max_attempts, created_at, updated_at)
         VALUES (@id, @name, @data, @state, @run_at, @attempt, @max_attempts, @created_at, @updated_at) ON CONFLICT (id) DO NOTHING`,
      );
      for (const row of rows) insert.run(row);
    }
    // Bounded statements: a broadcast's batch may hold thousands of jobs.
    for (let i = 0; !held && i < rows.length; i += ROWS_PER_INSERT) {
      await this.jobs(tx)
        .insertInto('queue_jobs')
        .values(rows.slice(i, i + ROWS_PER_INSERT))
        .onConflict((oc) => oc.column('id').doNothing())
        .execute();
    }
    for (const name of new Set(jobs.map((j) => j.name))) this.runner.nudge(name);
    return rows.map((r) => r.id);
  }

  async cancel(tx: JobDb, jobId: string): Promise<boolean> {
    const result = await this.jobs(tx)
      .updateTable('queue_jobs')
      .set({ state: 'cancelled', updated_at: this.now() })
      .where('id', '=', jobId)
      .where('state', '=', 'waiting')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async reschedule<T>(tx: JobDb, jobId: string, runAt: Date, data?: T): Promise<boolean> {
    const result = await this.jobs(tx)
      .updateTable('queue_jobs')
      .set({
        run_at: runAt.toISOString(),
        updated_at: this.now(),
        ...(data !== undefined ? { data: JSON.stringify(data) } : {}),
      })
      .where('id', '=', jobId)
      .where('state', '=', 'waiting')
      .executeTakeFirst();
    const moved = Number(result.numUpdatedRows) > 0;
    if (moved) this.runner.nudge();
    return moved;
  }

  work<T>(name: string, handler: JobHandler<T>, options?: WorkOptions): void {
    this.runner.register(name, handler, options);
  }

  workBatch<T>(name: string, handler: BatchJobHandler<T>, options: BatchWorkOptions): void {
    this.runner.registerBatch(name, handler, options);
  }

  async start(): Promise<void> {
    await this.runner.start();
    if (!this.purgeTimer) {
      void this.purge();
      this.purgeTimer = setInterval(() => void this.purge(), this.options.purgeIntervalMs ?? 300_000);
    }
  }

  async stop(): Promise<void> {
    if (this.purgeTimer) clearInterval(this.purgeTimer);
    this.purgeTimer = null;
    await this.runner.stop();
  }

  /**
   * Deletes finished jobs past their retention; returns how many. Walks the claim index
   * (name, state, run_at) name by name: a finished job ran after it was due, so
   * updated_at < cutoff implies run_at < cutoff, which bounds each range scan.
   */
  async purge(): Promise<number> {
    try {
      const doneBefore = this.now(-(this.options.keepDoneMs ?? 3_600_000));
      const failedBefore = this.now(-(this.options.keepFailedMs ?? 7 * 86_400_000));
      let deleted = 0;
      for (const name of await this.jobNames()) {
        const finished = async (states: QueueJobsTable['state'][], before: string) => {
          const result = await this.jobs(this.db)
            .deleteFrom('queue_jobs')
            .where('name', '=', name)
            .where('state', 'in', states)
            .where('run_at', '<', before)
            .where('updated_at', '<', before)
            .executeTakeFirst();
          deleted += Number(result.numDeletedRows);
        };
        await finished(['done', 'cancelled'], doneBefore);
        await finished(['failed'], failedBefore);
      }
      return deleted;
    } catch (err) {
      this.options.logger?.error({ err }, 'queue: purge failed');
      return 0;
    }
  }

  /**
   * Per name, one range scan of the claim index (name, state, run_at) over its waiting jobs:
   * proportional to the backlog, never to the jobs already done.
   */
  async depths(): Promise<QueueDepth[]> {
    const now = this.now();
    const depths: QueueDepth[] = [];
    for (const name of await this.jobNames()) {
      const row = await this.jobs(this.db)
        .selectFrom('queue_jobs')
        .select((eb) => [
          eb.fn.countAll<number>().as('waiting'),
          eb.fn.sum<number | null>(sql`run_at <= ${now}`).as('due'),
          eb.fn.min('run_at').as('oldest'),
        ])
        .where('name', '=', name)
        .where('state', '=', 'waiting')
        .executeTakeFirstOrThrow();
      const due = Number(row.due ?? 0);
      const oldest = due > 0 && row.oldest ? Math.max(0, (Date.parse(now) - Date.parse(row.oldest)) / 1000) : 0;
      depths.push({ name, due, delayed: Number(row.waiting) - due, oldestDueSeconds: oldest });
    }
    return depths;
  }

  /** Every job name in the table, by one index seek per name (a skip scan). */
  private async jobNames(): Promise<string[]> {
    const names: string[] = [];
    for (;;) {
      const after = names.at(-1);
      let query = this.jobs(this.db).selectFrom('queue_jobs').select((eb) => eb.fn.min('name').as('name'));
      if (after !== undefined) query = query.where('name', '>', after);
      const row = await query.executeTakeFirst();
      if (!row?.name) return names;
      names.push(row.name);
    }
  }

  // --- JobBackend -------------------------------------------------------------------------

  /**
   * Of `names`, those with a waiting job due or a running job whose lock expired: one read, two
   * index seeks (name, state, ...) per name that stop at the first row. A claim is an UPDATE and
   * takes SQLite's write lock even when it finds nothing; an idle server polled its 11 names four
   * times a second that way (70 statements a second with the webhook poll; 20 now).
   */
  async dueNames(names: string[]): Promise<Set<string>> {
    if (names.length === 0) return new Set();
    const now = this.now();
    const { rows } = await sql<{ name: string }>`
      WITH polled(name) AS (VALUES ${sql.join(names.map((name) => sql`(${name})`))})
      SELECT name FROM polled p
      WHERE EXISTS (SELECT 1 FROM queue_jobs q WHERE q.name = p.name AND q.state = 'waiting' AND q.run_at <= ${now})
         OR EXISTS (SELECT 1 FROM queue_jobs q WHERE q.name = p.name AND q.state = 'running' AND q.locked_until < ${now})`.execute(this.db);
    return new Set(rows.map((row) => row.name));
  }

  /**
   * Claims up to `limit` jobs of `name`: first running jobs whose lock expired (their worker
   * died; looked for at most every lockMs / 4, up to once a second), then due waiting ones in
   * run_at order. Two statements, each an index range scan
   * that stops after `limit` rows: one UPDATE over a UNION of both cost about three times
   * as much (measured), and the first finds nothing, and so writes nothing, almost always.
   */
  async claim(name: string, limit: number): Promise<ClaimedJob[]> {
    const now = this.now();
    const until = this.now(this.lockMs);
    const take = async (state: 'running' | 'waiting', max: number) => {
      const due = state === 'running' ? sql`locked_until < ${now}` : sql`run_at <= ${now}`;
      const { rows } = await sql<Pick<QueueJobsTable, 'id' | 'name' | 'data' | 'attempt' | 'max_attempts'>>`
        UPDATE queue_jobs
        SET state = 'running', attempt = attempt + 1, locked_by = ${this.workerId}, locked_until = ${until}, updated_at = ${now}
        WHERE id IN (
          SELECT id FROM queue_jobs WHERE name = ${name} AND state = ${state} AND ${due} ORDER BY run_at LIMIT ${max}
        )
        RETURNING id, name, data, attempt, max_attempts`.execute(this.db);
      return rows;
    };
    // A lock can only have expired lockMs after its worker stopped renewing it, so looking for
    // expired ones a few times per lock period is enough; most claims skip that statement.
    const nowMs = this.clock.now().getTime();
    const lastLook = this.expiredLookedAt.get(name);
    let expired: Awaited<ReturnType<typeof take>> = [];
    if (lastLook === undefined || nowMs - lastLook >= Math.min(1000, this.lockMs / 4) || nowMs < lastLook) {
      this.expiredLookedAt.set(name, nowMs);
      expired = await take('running', limit);
    }
    const rows = expired.length < limit ? [...expired, ...(await take('waiting', limit - expired.length))] : expired;
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      data: JSON.parse(r.data) as unknown,
      attempt: r.attempt,
      maxAttempts: r.max_attempts,
      token: r.attempt,
    }));
  }

  /** Writes to a job only while this worker still holds the lock of that very run. */
  private held(job: ClaimedJob, db: JobDb = this.db) {
    return this.jobs(db)
      .updateTable('queue_jobs')
      .where('id', '=', job.id)
      .where('state', '=', 'running')
      .where('locked_by', '=', this.workerId)
      .where('attempt', '=', job.token as number);
  }

  async complete(job: ClaimedJob): Promise<void> {
    await this.held(job).set({ state: 'done', locked_by: null, locked_until: null, updated_at: this.now() }).execute();
  }

  /**
   * complete() of a batch's jobs in one statement (one commit, one statement instead of one
   * each): each job only while this worker holds that very run (its id with its attempt).
   */
  async completeMany(jobs: ClaimedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    const runs = sql.join(jobs.map((job) => sql`(${job.id}, ${job.token as number})`));
    await sql`
      UPDATE queue_jobs SET state = 'done', locked_by = NULL, locked_until = NULL, updated_at = ${this.now()}
      WHERE id IN (${sql.join(jobs.map((job) => job.id))}) AND state = 'running' AND locked_by = ${this.workerId}
        AND (id, attempt) IN (VALUES ${runs})`.execute(this.db);
  }

  async retry(job: ClaimedJob, delayMs: number, error: string): Promise<void> {
    await this.held(job)
      .set({ state: 'waiting', run_at: this.now(delayMs), last_error: error, locked_by: null, locked_until: null, updated_at: this.now() })
      .execute();
  }

  async fail(job: ClaimedJob, error: string): Promise<void> {
    await this.held(job).set({ state: 'failed', last_error: error, locked_by: null, locked_until: null, updated_at: this.now() }).execute();
  }

  async release(jobs: ClaimedJob[]): Promise<void> {
    for (const job of jobs) {
      await this.held(job)
        .set({ state: 'waiting', run_at: this.now(), attempt: sql`attempt - 1`, locked_by: null, locked_until: null, updated_at: this.now() })
        .execute();
    }
  }

  /**
   * Back to waiting, due after delayMs, the run not counted. The claim takes due jobs in run_at
   * order, so a run_at of now puts the job behind every job of its name due before it.
   */
  async defer(job: ClaimedJob, delayMs: number): Promise<void> {
    await this.held(job)
      .set({ state: 'waiting', run_at: this.now(delayMs), attempt: sql`attempt - 1`, locked_by: null, locked_until: null, updated_at: this.now() })
      .execute();
  }

  async heartbeat(jobs: ClaimedJob[]): Promise<void> {
    await this.jobs(this.db)
      .updateTable('queue_jobs')
      .set({ locked_until: this.now(this.lockMs) })
      .where('id', 'in', jobs.map((j) => j.id))
      .where('state', '=', 'running')
      .where('locked_by', '=', this.workerId)
      .execute();
  }
}

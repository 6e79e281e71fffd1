import { createRequire } from 'node:module';
import { CompiledQuery } from 'kysely';
import pg from 'pg';
import type PgBoss from 'pg-boss';
import { uuidv7 } from 'uuidv7';
import type { Ids } from '../clock.js';
import { type BatchJobHandler, type BatchWorkOptions, type EnqueueOptions, type JobHandler, type JobToEnqueue, type Queue, type QueueDepth, type WorkOptions, keyedJobId, type JobDb } from './port.js';
import { type ClaimedJob, type JobBackend, JobRunner } from './runner.js';
import { retryDeadlock } from '../storage/errors.js';
import { deferred, prepared } from '../storage/pg-prepared.js';
import { type CommonQueueOptions, resolveMaxAttempts } from './sqlite-queue.js';

export interface PgBossQueueOptions extends CommonQueueOptions {
  /** PostgreSQL schema pg-boss installs its tables in. Default 'pgboss'. */
  bossSchema?: string;
  /**
   * Connection string for a LISTEN connection: enqueue() runs pg_notify on the caller's
   * transaction, delivered at commit, so idle workers in every process wake at once. Without it
   * workers find new jobs at the next poll.
   */
  databaseUrl?: string;
  /** pg-boss maintenance: expires the locks of dead workers, archives and deletes old jobs. Default 30 s. */
  maintenanceIntervalSeconds?: number;
  /** Completed/failed jobs move to pg-boss's archive after this long. Default 1 h. */
  archiveAfterSeconds?: number;
  /** Archived jobs are deleted after this many days. Default 7. */
  deleteAfterDays?: number;
}

/**
 * Runs pg-boss's SQL on a Kysely (the pool, or the caller's transaction connection); `mark`
 * marks each text (deferred: for statements whose result is not read).
 */
function executor(db: JobDb, mark: (text: string) => string = (text) => text): PgBoss.Db {
  return {
    async executeSql(text: string, values?: unknown[]) {
      const result = await db.executeQuery(CompiledQuery.raw(mark(text), values ?? []));
      return { rows: result.rows };
    },
  };
}

const ID_PATTERN = /^(.+):([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

/**
 * pg-boss addresses a job by (queue name, id): its job table is partitioned by name. The port's
 * cancel/reschedule get only an id, so the id we hand out carries the name: `<name>:<uuid>`.
 */
function parseId(jobId: string): { name: string; uuid: string } | null {
  const m = ID_PATTERN.exec(jobId);
  return m ? { name: m[1], uuid: m[2] } : null;
}

const uuidIds: Ids = { uuid: () => uuidv7() };

/**
 * The Queue port over pg-boss 10 on the application's PostgreSQL. pg-boss owns the schema, the
 * transactional insert (send with `db` on the caller's transaction), the claim (fetch, FOR UPDATE
 * SKIP LOCKED) and maintenance (expiring active jobs whose worker died, archiving, deleting).
 * What its API lacks is a few statements on its v10 `job` table, each fenced by state (and by
 * started_on, the claim's token, so a stale worker changes nothing):
 * - cancel/reschedule only while the job waits (pg-boss cancel also cancels active jobs, and it
 *   has no reschedule);
 * - retry after our own delay (pg-boss's retry delay is whole seconds per job, so neither our
 *   full-jitter backoff nor RetryJobError.delayMs fit it);
 * - heartbeat: extends expire_in while the handler runs, so expire_in works as a renewable lock;
 * - release on stop without spending an attempt (pg-boss's stop fails active jobs instead).
 */
export class PgBossQueue implements Queue, JobBackend {
  private readonly boss: PgBoss;
  private readonly runner: JobRunner;
  private readonly ids: Ids;
  private readonly lockMs: number;
  private readonly schema: string;
  private readonly channel: string;
  /** Job names already NOTIFYed in a transaction (keyed by the transaction). */
  private readonly notifiedIn = new WeakMap<JobDb, Set<string>>();
  private readonly queues = new Map<string, Promise<void>>();
  private starting: Promise<void> | null = null;
  private createChain: Promise<void> = Promise.resolve();
  private listener: pg.Client | null = null;
  private stopped = false;

  constructor(
    private readonly db: JobDb,
    private readonly options: PgBossQueueOptions = {},
  ) {
    this.ids = options.ids ?? uuidIds;
    this.lockMs = options.lockMs ?? 30_000;
    this.schema = options.bossSchema ?? 'pgboss';
    this.channel = `queue_${this.schema}`;
    // pg-boss is loaded only by a PostgreSQL queue: an SQLite process never holds it (docs/memory.md).
    const PgBossClass = createRequire(import.meta.url)('pg-boss') as typeof PgBoss;
    this.boss = new PgBossClass({
      db: executor(db),
      schema: this.schema,
      schedule: false,
      supervise: true,
      migrate: true,
      maintenanceIntervalSeconds: options.maintenanceIntervalSeconds ?? 30,
      archiveCompletedAfterSeconds: options.archiveAfterSeconds ?? 3600,
      archiveFailedAfterSeconds: options.archiveAfterSeconds ?? 3600,
      deleteAfterDays: options.deleteAfterDays ?? 7,
    });
    // An EventEmitter 'error' without a listener would crash the process.
    this.boss.on('error', (err) => options.logger?.error({ err }, 'queue: pg-boss error'));
    this.runner = new JobRunner(this, {
      pollIntervalMs: options.pollIntervalMs ?? 1000,
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

  /** Installs or migrates pg-boss's schema once (also needed by processes that only enqueue). */
  private ready(): Promise<void> {
    this.starting ??= this.boss.start().then(() => undefined);
    return this.starting;
  }

  /**
   * pg-boss 10 makes a table partition per queue name. Two create_queue calls at once can
   * deadlock on the parent table (seen in tests), so this process creates them one at a time and
   * retries a deadlock lost to another process.
   */
  private ensureQueue(name: string): Promise<void> {
    let created = this.queues.get(name);
    if (!created) {
      created = this.createChain.then(async () => {
        await this.ready();
        for (let attempt = 1; ; attempt++) {
          try {
            await this.boss.createQueue(name, { name, policy: 'standard', retryDelay: 0, retryBackoff: false });
            return;
          } catch (err) {
            if ((err as { code?: string }).code !== '40P01' || attempt >= 5) throw err;
            await new Promise((r) => setTimeout(r, 20 * attempt));
          }
        }
      });
      this.createChain = created.catch(() => undefined);
      created.catch(() => this.queues.delete(name));
      this.queues.set(name, created);
    }
    return created;
  }

  private async exec<R = Record<string, unknown>>(db: JobDb, text: string, values: unknown[]): Promise<R[]> {
    const result = await db.executeQuery(CompiledQuery.raw(text, values));
    return result.rows as R[];
  }

  /**
   * One statement over pg-boss's fetch index (job_i5: name, start_after, on jobs not yet
   * active): proportional to the backlog, never to the completed jobs kept for the archive.
   * Every queue pg-boss knows is listed, at 0 when nothing waits, as the embedded queue lists
   * every job name in its table: the same series on both engines from a process's first scrape.
   */
  async depths(): Promise<QueueDepth[]> {
    await this.ready();
    const rows = await this.exec<{ name: string; due: string; delayed: string; oldest: number | string | null }>(
      this.db,
      `SELECT q.name,
              count(j.id) FILTER (WHERE j.start_after <= now()) AS due,
              count(j.id) FILTER (WHERE j.start_after > now()) AS delayed,
              extract(epoch FROM now() - min(j.start_after) FILTER (WHERE j.start_after <= now()))::float8 AS oldest
         FROM ${this.schema}.queue q
         LEFT JOIN ${this.schema}.job j ON j.name = q.name AND j.state < 'active'
        GROUP BY q.name`,
      [],
    );
    return rows.map((r) => ({ name: r.name, due: Number(r.due), delayed: Number(r.delayed), oldestDueSeconds: Math.max(0, Number(r.oldest ?? 0)) }));
  }

  async enqueue<T>(tx: JobDb, name: string, data: T, options: EnqueueOptions = {}): Promise<string> {
    const maxAttempts = resolveMaxAttempts(options.maxAttempts, this.options.maxAttempts ?? 10);
    await this.ensureQueue(name);
    const uuid = options.key === undefined ? this.ids.uuid() : keyedJobId(name, options.key);
    // Pre-serialised: node-pg would turn a bare array or string into a non-JSON parameter.
    const id = await this.boss.send(name, JSON.stringify(data ?? null) as unknown as object, {
      id: uuid,
      startAfter: options.runAt,
      // One retry more than the attempts: pg-boss itself retries a job whose worker died
      // (expired), and on the last attempt it would fail it without our runner seeing it. With
      // the spare, the runner is handed attempt maxAttempts + 1 and fails it for good itself,
      // calling the handler's onFailed (runner.ts). Jobs enqueued before this get one attempt less.
      retryLimit: maxAttempts,
      retryDelay: 0,
      retryBackoff: false,
      expireInSeconds: Math.max(1, this.lockMs / 1000),
      db: executor(tx),
    });
    // pg-boss inserts nothing for an id it holds already: expected for a keyed job.
    if (!id && options.key === undefined) throw new Error(`queue: pg-boss did not insert the '${name}' job`);
    // One NOTIFY per name and transaction is enough (PostgreSQL delivers it once, at commit):
    // a batch of sends enqueues in one transaction.
    const notified = tx.isTransaction ? (this.notifiedIn.get(tx) ?? new Set<string>()) : new Set<string>();
    if (!notified.has(name)) {
      await this.exec(tx, 'select pg_notify($1, $2)', [this.channel, name]);
      notified.add(name);
      if (tx.isTransaction) this.notifiedIn.set(tx, notified);
    }
    this.runner.nudge(name);
    return `${name}:${uuid}`;
  }

  /**
   * One statement for the whole list: pg-boss's insert, with the NOTIFY of each name not yet
   * notified in this transaction folded into it (a batch of accepted sends enqueues its jobs
   * together; a round trip less per batch, measured issue 11: each round trip of the intake's
   * transaction costs both processes CPU on a shared host, and the batch its latency).
   */
  async enqueueMany(tx: JobDb, jobs: JobToEnqueue[]): Promise<string[]> {
    if (jobs.length === 0) return [];
    const names = new Set(jobs.map((j) => j.name));
    for (const name of names) await this.ensureQueue(name);
    const rows = jobs.map(({ name, data, options = {} }) => {
      const maxAttempts = resolveMaxAttempts(options.maxAttempts, this.options.maxAttempts ?? 10);
      return {
        id: options.key === undefined ? this.ids.uuid() : keyedJobId(name, options.key),
        name,
        // Serialised with the whole list (JSON), so unlike send() the data goes as it is.
        data: data ?? null,
        startAfter: options.runAt?.toISOString(),
        // As in enqueue(): one retry more than the attempts.
        retryLimit: maxAttempts,
        retryDelay: 0,
        retryBackoff: false,
        expireInSeconds: Math.max(1, this.lockMs / 1000),
      };
    });
    const notified = tx.isTransaction ? (this.notifiedIn.get(tx) ?? new Set<string>()) : new Set<string>();
    const notify = [...names].filter((name) => !notified.has(name));
    // Deferred (PgClient): nobody reads what the insert answers (the ids are ours), so in the
    // caller's transaction it is sent with the statements after it.
    await this.boss.insert(rows as PgBoss.JobInsert[], { db: notify.length === 0 ? executor(tx, deferred) : this.notifyingExecutor(tx, notify) } as PgBoss.InsertOptions);
    for (const name of notify) notified.add(name);
    if (tx.isTransaction) this.notifiedIn.set(tx, notified);
    for (const name of names) this.runner.nudge(name);
    return rows.map((r) => `${r.name}:${r.id}`);
  }

  /**
   * Runs pg-boss's insert as a data-modifying WITH of a statement that sends the NOTIFYs (a
   * WITH's INSERT runs to completion whether or not the outer query reads it).
   */
  private notifyingExecutor(tx: JobDb, names: string[]): PgBoss.Db {
    return {
      executeSql: async (text: string, values?: unknown[]) => {
        const params = values ?? [];
        const n = params.length;
        // Prepared (one text per schema): pg-boss's insert is long to parse and plan.
        const sql = deferred(prepared(`queue_insert_${this.schema}`, `WITH inserted AS (${text}) SELECT pg_notify($${n + 1}, name) FROM unnest($${n + 2}::text[]) AS name`));
        await this.exec(tx, sql, [...params, this.channel, names]);
        return { rows: [] };
      },
    };
  }

  async cancel(tx: JobDb, jobId: string): Promise<boolean> {
    const ref = parseId(jobId);
    if (!ref) return false;
    await this.ready();
    const rows = await this.exec(
      tx,
      `UPDATE ${this.schema}.job SET state = 'cancelled', completed_on = now()
       WHERE name = $1 AND id = $2::uuid AND state < 'active' RETURNING 1`,
      [ref.name, ref.uuid],
    );
    return rows.length > 0;
  }

  /** Same job id: start_after (and data) change in place; the retention window moves along. */
  async reschedule<T>(tx: JobDb, jobId: string, runAt: Date, data?: T): Promise<boolean> {
    const ref = parseId(jobId);
    if (!ref) return false;
    await this.ready();
    const rows = await this.exec(
      tx,
      `UPDATE ${this.schema}.job
       SET start_after = $3::timestamptz, keep_until = $3::timestamptz + (keep_until - start_after),
           data = COALESCE($4::jsonb, data)
       WHERE name = $1 AND id = $2::uuid AND state < 'active' RETURNING 1`,
      [ref.name, ref.uuid, runAt.toISOString(), data === undefined ? null : JSON.stringify(data)],
    );
    if (rows.length === 0) return false;
    await this.exec(tx, 'select pg_notify($1, $2)', [this.channel, ref.name]);
    return true;
  }

  work<T>(name: string, handler: JobHandler<T>, options?: WorkOptions): void {
    this.runner.register(name, handler, options);
  }

  workBatch<T>(name: string, handler: BatchJobHandler<T>, options: BatchWorkOptions): void {
    this.runner.registerBatch(name, handler, options);
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.ready();
    await this.listen();
    await this.runner.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.runner.stop();
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => undefined);
    if (this.starting) {
      await this.starting.catch(() => undefined);
      // Nothing of ours runs inside pg-boss's own workers; this stops its maintenance timers.
      await this.boss.stop({ graceful: true, wait: true, close: false, timeout: 1000 });
      // A later start() (worker restart) starts pg-boss again.
      this.starting = null;
    }
  }

  private async listen(): Promise<void> {
    const url = this.options.databaseUrl;
    if (!url || this.stopped || this.listener) return;
    const client = new pg.Client({ connectionString: url });
    this.listener = client;
    const reconnect = (err?: unknown) => {
      if (this.listener !== client) return;
      this.listener = null;
      if (err) this.options.logger?.warn({ err }, 'queue: LISTEN connection lost; reconnecting');
      client.end().catch(() => undefined);
      setTimeout(() => {
        void this.listen()
          .then(() => this.runner.nudge())
          .catch(() => reconnect());
      }, 1000);
    };
    client.on('notification', (msg) => {
      if (msg.channel === this.channel) this.runner.nudge(msg.payload || undefined);
    });
    client.on('error', reconnect);
    client.on('end', () => reconnect());
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
    } catch (err) {
      reconnect(err);
    }
  }

  // --- JobBackend -------------------------------------------------------------------------

  async prepare(names: string[]): Promise<void> {
    await Promise.all(names.map((n) => this.ensureQueue(n)));
  }

  async claim(name: string, limit: number): Promise<ClaimedJob[]> {
    const jobs = await this.boss.fetch<unknown>(name, { batchSize: limit, includeMetadata: true });
    return jobs.map((j) => ({
      id: `${name}:${j.id}`,
      name,
      data: j.data,
      attempt: j.retryCount + 1,
      maxAttempts: j.retryLimit,
      token: j.startedOn,
    }));
  }

  /** Runs a statement on the job only while it is still active under this very claim. */
  private async fenced(job: ClaimedJob, set: string, extra: unknown[] = [], db: JobDb = this.db): Promise<void> {
    const ref = parseId(job.id)!;
    await this.exec(
      db,
      `UPDATE ${this.schema}.job SET ${set}
       WHERE name = $1 AND id = $2::uuid AND state = 'active'
         AND abs(extract(epoch from (started_on - $3::timestamptz))) < 0.001`,
      [ref.name, ref.uuid, job.token, ...extra],
    );
  }

  async complete(job: ClaimedJob): Promise<void> {
    await this.fenced(job, `state = 'completed', completed_on = now(), output = NULL`);
  }

  /**
   * complete() of a batch's jobs: one statement per queue name (fenced per job by its claim, as
   * fenced() does) instead of one per job: a round trip and a statement per message was a
   * measurable share of PostgreSQL's work in a process that also answers sends (issue 11).
   */
  async completeMany(jobs: ClaimedJob[]): Promise<void> {
    const byName = groupByName(jobs);
    const complete = async (db: JobDb) => {
      for (const [name, { uuids, tokens }] of byName) {
        // Rows locked in (name, id) order, the heartbeat's, so the two never wait on each other in a cycle.
        await this.exec(
          db,
          `WITH claims AS (SELECT * FROM unnest($2::uuid[], $3::timestamptz[]) AS c(id, token)),
           locked AS (
             SELECT j.id FROM ${this.schema}.job j JOIN claims c ON c.id = j.id
             WHERE j.name = $1 AND j.state = 'active' AND abs(extract(epoch from (j.started_on - c.token))) < 0.001
             ORDER BY j.id FOR UPDATE OF j
           )
           UPDATE ${this.schema}.job j SET state = 'completed', completed_on = now(), output = NULL
           FROM locked WHERE j.name = $1 AND j.id = locked.id`,
          [name, uuids, tokens],
        );
      }
    };
    // Several names: still one commit.
    await retryDeadlock(() => (byName.size === 1 ? complete(this.db) : this.db.transaction().execute(complete)));
  }

  async retry(job: ClaimedJob, delayMs: number, error: string): Promise<void> {
    await this.fenced(job, `state = 'retry', start_after = now() + $4::double precision * interval '1 millisecond', output = $5::jsonb`, [
      delayMs,
      JSON.stringify({ message: error }),
    ]);
  }

  async fail(job: ClaimedJob, error: string): Promise<void> {
    await this.fenced(job, `state = 'failed', completed_on = now(), output = $4::jsonb`, [JSON.stringify({ message: error })]);
  }

  async release(jobs: ClaimedJob[]): Promise<void> {
    for (const job of jobs) {
      // The next fetch adds 1 to retry_count when started_on is set: undo this run's share.
      await this.fenced(
        job,
        `state = 'retry', start_after = now(),
         started_on = CASE WHEN retry_count = 0 THEN NULL ELSE started_on END,
         retry_count = GREATEST(retry_count - 1, 0)`,
      );
    }
  }

  /**
   * Back to waiting (pg-boss's 'retry'), due after delayMs, the run not counted (as release()).
   * pg-boss claims in (priority, created_on) order, so created_on moves to now: the job goes
   * behind every job of its name due before it, as on SQLite (whose claim orders by run_at).
   * created_on serves pg-boss only for that order and for copies to its archive. The lock period
   * goes back to lockMs (the heartbeats of the run lengthened it).
   */
  async defer(job: ClaimedJob, delayMs: number): Promise<void> {
    await this.fenced(
      job,
      `state = 'retry', start_after = now() + $4::double precision * interval '1 millisecond', created_on = now(),
       expire_in = $5::double precision * interval '1 millisecond',
       started_on = CASE WHEN retry_count = 0 THEN NULL ELSE started_on END,
       retry_count = GREATEST(retry_count - 1, 0)`,
      [delayMs, this.lockMs],
    );
  }

  /**
   * Extends the lock of this worker's jobs. Rows are locked in (name, id) order, the order
   * completeMany locks them in too; pg-boss's maintenance (expiring jobs) locks in its own order
   * and may still deadlock with us (40P01): a heartbeat is idempotent, so it is retried.
   * Fenced by the claim's started_on, so a worker whose claim expired and was taken by another
   * does not renew the other's lock (two workers beating the same rows).
   */
  async heartbeat(jobs: ClaimedJob[]): Promise<void> {
    const byName = groupByName(jobs);
    for (const [name, { uuids, tokens }] of byName) {
      // pg-boss expires an active job when started_on + expire_in < now().
      await retryDeadlock(() =>
        this.exec(
          this.db,
          `WITH claims AS (SELECT * FROM unnest($2::uuid[], $3::timestamptz[]) AS c(id, token)),
           locked AS (
             SELECT j.id FROM ${this.schema}.job j JOIN claims c ON c.id = j.id
             WHERE j.name = $1 AND j.state = 'active' AND abs(extract(epoch from (j.started_on - c.token))) < 0.001
             ORDER BY j.id FOR UPDATE OF j
           )
           UPDATE ${this.schema}.job j SET expire_in = (now() - j.started_on) + $4::double precision * interval '1 millisecond'
           FROM locked WHERE j.name = $1 AND j.id = locked.id`,
          [name, uuids, tokens, this.lockMs],
        ),
      );
    }
  }
}

/** A list of jobs as their uuids and claim tokens per queue name, in the order rows are locked (sortedByRow). */
function groupByName(jobs: ClaimedJob[]): Map<string, { uuids: string[]; tokens: unknown[] }> {
  const byName = new Map<string, { uuids: string[]; tokens: unknown[] }>();
  for (const job of sortedByRow(jobs)) {
    const ref = parseId(job.id)!;
    const entry = byName.get(ref.name) ?? { uuids: [], tokens: [] };
    entry.uuids.push(ref.uuid);
    entry.tokens.push(job.token);
    byName.set(ref.name, entry);
  }
  return byName;
}

/** Jobs in the order their rows are locked everywhere in this file: by name, then id. */
function sortedByRow(jobs: ClaimedJob[]): ClaimedJob[] {
  return [...jobs].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

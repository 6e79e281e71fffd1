import { CompiledQuery } from 'kysely';
import pg from 'pg';
import { type Queue, type QueueOptions, createQueue } from '../../src/queue/index.js';
import type { ClaimedJob, JobBackend } from '../../src/queue/runner.js';
import type { Dialect, Storage } from '../../src/storage/db.js';
import { type TestStorage, createTestStorage } from '../helpers/storage.js';

export interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Only for retry jitter and polling intervals: a test waits for events, never for time to pass. */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns a value other than undefined/false (bounded). */
export async function waitFor<T>(check: () => Promise<T | undefined | false>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(15);
  }
}

/**
 * Watches the looks a queue's worker takes at each job name (one per poll of a name: a claim, or
 * on SQLite a look for due jobs that found none for it), so a test can wait for the worker to
 * have looked again (and see what it took) instead of waiting for time to pass.
 */
export interface ClaimWatch {
  /** Ids of every job claimed so far, in order (a job run twice appears twice). */
  readonly claimed: string[];
  /** Looks begun so far, of any name. */
  begun(): number;
  /** Resolves once `count` looks at `name` that began after this call have finished. */
  polls(name: string, count?: number): Promise<void>;
}

export function watchClaims(queue: Queue): ClaimWatch {
  // Both engines are their runner's backend: the runner calls this object's claim() and dueNames().
  const backend = queue as unknown as JobBackend;
  const claim = backend.claim.bind(backend);
  const dueNames = backend.dueNames?.bind(backend);
  const claimed: string[] = [];
  let begun = 0;
  const waiters = new Set<{ name: string; after: number; left: number; resolve(): void }>();
  const looked = (names: Iterable<string>, seq: number) => {
    for (const name of names) {
      for (const w of waiters) {
        if (w.name !== name || seq <= w.after) continue;
        if (--w.left === 0) {
          waiters.delete(w);
          w.resolve();
        }
      }
    }
  };
  backend.claim = async (name: string, limit: number): Promise<ClaimedJob[]> => {
    const seq = ++begun;
    try {
      const jobs = await claim(name, limit);
      claimed.push(...jobs.map((j) => j.id));
      return jobs;
    } finally {
      looked([name], seq);
    }
  };
  if (dueNames) {
    // A name found with nothing due has been looked at; a due one is counted by its claim.
    backend.dueNames = async (names: string[]): Promise<Set<string>> => {
      const seq = ++begun;
      const due = await dueNames(names);
      looked(
        names.filter((name) => !due.has(name)),
        seq,
      );
      return due;
    };
  }
  return {
    claimed,
    begun: () => begun,
    polls(name, count = 3) {
      return new Promise<void>((resolve) => waiters.add({ name, after: begun, left: count, resolve }));
    },
  };
}

/** A job as stored, in the SQLite queue's terms whatever the engine. */
export interface StoredJob {
  state: 'waiting' | 'running' | 'done' | 'failed' | 'cancelled';
  /** Runs started so far. */
  attempt: number;
  lastError: string | null;
  /** Not started before this (SQLite run_at, pg-boss start_after). */
  runAt: Date;
}

const PG_STATES: Record<string, StoredJob['state']> = {
  created: 'waiting',
  retry: 'waiting',
  active: 'running',
  completed: 'done',
  failed: 'failed',
  cancelled: 'cancelled',
};

export interface QueueEnv {
  kind: Dialect;
  storage: TestStorage;
  /** pg-boss schema of this test (PostgreSQL). */
  bossSchema?: string;
  pgSchema?: string;
  queue(options?: QueueOptions, storage?: Storage): Queue;
  job(id: string): Promise<StoredJob | undefined>;
  /** A raw statement on the test database (placeholders in the engine's syntax). */
  raw<R>(text: string, values?: unknown[]): Promise<R[]>;
  jobCount(): Promise<number>;
  cleanup(): Promise<void>;
}

/** A migrated database plus queues that are all stopped (and pg-boss's schema dropped) on cleanup. */
/**
 * Kysely's Migrator checks for its lock table in any schema (introspection is not scoped to the
 * search_path), so while another test run holds a schema with that table, migrating a fresh
 * schema can fail with 'relation "kysely_migration_lock" does not exist'. Retry that case.
 */
async function createStorageWithRetry(kind: Dialect): Promise<TestStorage> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await createTestStorage(kind);
    } catch (err) {
      if (attempt >= 8 || !String((err as Error).message).includes('kysely_migration_lock')) throw err;
      await sleep(50 + Math.random() * 200);
    }
  }
}

export async function queueEnv(kind: Dialect): Promise<QueueEnv> {
  const storage = await createStorageWithRetry(kind);
  const pgSchema = kind === 'postgres' ? storage.location.split(' schema ')[1] : undefined;
  const bossSchema = pgSchema ? `${pgSchema}_boss` : undefined;
  const queues: Queue[] = [];
  const extraStorages: Storage[] = [];
  const raw = async <R>(text: string, values: unknown[] = []) =>
    (await storage.db.executeQuery(CompiledQuery.raw(text, values))).rows as R[];
  return {
    kind,
    storage,
    bossSchema,
    pgSchema,
    queue(options = {}, s = storage) {
      if (s !== storage && !extraStorages.includes(s)) extraStorages.push(s);
      const q = createQueue(s, { bossSchema, databaseUrl: process.env.DATABASE_URL, pollIntervalMs: 20, ...options });
      queues.push(q);
      return q;
    },
    raw,
    async job(id) {
      if (kind === 'sqlite') {
        const rows = await raw<{ state: StoredJob['state']; attempt: number; last_error: string | null; run_at: string }>(
          'select state, attempt, last_error, run_at from queue_jobs where id = ?',
          [id],
        );
        const r = rows[0];
        return r ? { state: r.state, attempt: r.attempt, lastError: r.last_error, runAt: new Date(r.run_at) } : undefined;
      }
      const uuid = id.slice(-36);
      const rows = await raw<{ state: string; retry_count: number; started_on: Date | null; start_after: Date; output: { message?: string } | null }>(
        `select state, retry_count, started_on, start_after, output from ${bossSchema}.job where id = $1`,
        [uuid],
      );
      const r = rows[0];
      if (!r) return undefined;
      return { state: PG_STATES[r.state], attempt: r.started_on ? r.retry_count + 1 : 0, lastError: r.output?.message ?? null, runAt: new Date(r.start_after) };
    },
    async jobCount() {
      const rows = await raw<{ n: number }>(
        kind === 'sqlite' ? 'select count(*) as n from queue_jobs' : `select count(*)::int as n from ${bossSchema}.job`,
      );
      return Number(rows[0].n);
    },
    async cleanup() {
      await Promise.all(queues.map((q) => q.stop()));
      for (const s of extraStorages) await s.close();
      await storage.destroy();
      if (bossSchema) {
        const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
        await client.connect();
        await client.query(`drop schema if exists ${bossSchema} cascade`);
        await client.end();
      }
    },
  };
}

import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { ManualClock } from '../helpers/context.js';
import { type QueueEnv, queueEnv, waitFor } from './helpers.js';

const JOBS = 24;
const CONCURRENCY = 4;
const LOCK_MS = 1000;

function spawnWorker(env: QueueEnv): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'test/queue/fixtures/worker.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      QUEUE_KIND: env.kind,
      SQLITE_FILE: env.kind === 'sqlite' ? env.storage.location : '',
      PG_SCHEMA: env.pgSchema ?? '',
      BOSS_SCHEMA: env.bossSchema ?? '',
      LOCK_MS: String(LOCK_MS),
      WORK_MS: '150',
      CONCURRENCY: String(CONCURRENCY),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Starts the fixture worker and SIGKILLs it once 5 jobs are done and others are running. */
async function killMidWork(env: QueueEnv, track: (child: ChildProcess) => void): Promise<{ worker: ChildProcess; inFlightAtKill: number; started: string[] }> {
  const worker = spawnWorker(env);
  track(worker);
  let out = '';
  let err = '';
  worker.stderr!.on('data', (d) => (err += d));
  const inFlightAtKill = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker made no progress; stdout: ${out}; stderr: ${err}`)), 30_000);
    worker.stdout!.on('data', (d) => {
      out += d;
      const starts = out.match(/^start /gm)?.length ?? 0;
      const dones = out.match(/^done /gm)?.length ?? 0;
      if (dones >= 5 && starts > dones && worker.exitCode === null && worker.signalCode === null) {
        clearTimeout(timer);
        worker.kill('SIGKILL');
        resolve(starts - dones);
      }
    });
    worker.on('exit', (code, signal) => {
      if (signal !== 'SIGKILL') reject(new Error(`worker exited early (${code}); stderr: ${err}`));
    });
  });
  await new Promise((r) => (worker.exitCode !== null || worker.signalCode !== null ? r(null) : worker.once('exit', r)));
  const done = new Set([...out.matchAll(/^done (\S+)/gm)].map((m) => m[1]));
  const started = [...out.matchAll(/^start (\S+)/gm)].map((m) => m[1]).filter((k) => !done.has(k));
  return { worker, inFlightAtKill, started };
}

/**
 * The survivor's view of time. SQLite: its queue's clock, set past every lock the dead worker
 * can have renewed (its last renewal was before the kill, for LOCK_MS), so the takeover needs no
 * real wait; the clock stands still, so the survivor's own locks never expire under it.
 * pg-boss expires locks on the server's clock (its maintenance), which no test moves.
 */
function survivorClock(env: QueueEnv): { clock?: ManualClock } {
  return env.kind === 'sqlite' ? { clock: new ManualClock(new Date(Date.now() + LOCK_MS + 1)) } : {};
}

describe.each(STORAGE_KINDS)('queue fault tolerance on %s', (kind) => {
  let env: QueueEnv | undefined;
  let child: ChildProcess | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await env?.cleanup();
  });

  it('a worker SIGKILLed mid-work loses no job: another takes its jobs over once their locks expire', async () => {
    env = await queueEnv(kind);
    const db = env.storage.db;
    await sql`create table fault_done (key text not null, attempt integer not null, pid integer not null)`.execute(db);

    const producer = env.queue({ lockMs: LOCK_MS });
    const ids = await db.transaction().execute(async (trx) => {
      const out: string[] = [];
      for (let i = 0; i < JOBS; i++) out.push(await producer.enqueue(trx, 'fault.work', { key: `k${i}` }));
      return out;
    });

    const { worker, inFlightAtKill } = await killMidWork(env, (c) => (child = c));
    expect(inFlightAtKill).toBeGreaterThan(0);
    expect(inFlightAtKill).toBeLessThanOrEqual(CONCURRENCY);

    // The second worker: another connection in this process.
    const second = env.queue({ lockMs: LOCK_MS, maintenanceIntervalSeconds: 1, ...survivorClock(env) }, env.storage.reopen());
    second.work<{ key: string }>(
      'fault.work',
      async (data, job) => {
        await sql`insert into fault_done (key, attempt, pid) values (${data.key}, ${job.attempt}, ${process.pid})`.execute(db);
      },
      { concurrency: CONCURRENCY },
    );
    const takeoverStart = Date.now();
    await second.start();

    // Every job recorded done by the queue: a job in flight at the kill may have written its row
    // already, but only a run that finished under a live worker completes it, so this waits for
    // the takeover itself, not only for every key to appear.
    const rows = await waitFor(
      async () => {
        for (const id of ids) if ((await env!.job(id))?.state !== 'done') return undefined;
        const { rows } = await sql<{ key: string; attempt: number; pid: number }>`select key, attempt, pid from fault_done`.execute(db);
        return new Set(rows.map((r) => r.key)).size === JOBS ? rows : undefined;
      },
      20_000,
      'every job to complete',
    );
    const keys = new Set(rows.map((r) => r.key));
    expect([...keys].sort()).toEqual(Array.from({ length: JOBS }, (_, i) => `k${i}`).sort());
    // At-least-once: only a job whose handler finished but whose completion was not recorded
    // before the kill can run twice, so duplicates are bounded by the jobs in flight.
    const duplicates = rows.length - JOBS;
    expect(duplicates).toBeGreaterThanOrEqual(0);
    expect(duplicates).toBeLessThanOrEqual(CONCURRENCY);
    const killedPid = worker.pid;
    expect(rows.filter((r) => r.pid === killedPid).length).toBeGreaterThanOrEqual(5);
    // Jobs the dead worker held were run again (second attempt) by the survivor.
    const takenOver = rows.filter((r) => r.pid === process.pid && r.attempt >= 2);
    expect(takenOver.length).toBeGreaterThan(0);
    expect(Date.now() - takeoverStart).toBeLessThan(15_000);
  });

  it('a job whose worker is SIGKILLed on its last attempt fails for good through onFailed, on both engines', async () => {
    env = await queueEnv(kind);
    const db = env.storage.db;
    await sql`create table fault_done (key text not null, attempt integer not null, pid integer not null)`.execute(db);
    const producer = env.queue({ lockMs: LOCK_MS });
    const ids = new Map<string, string>();
    await db.transaction().execute(async (trx) => {
      for (let i = 0; i < JOBS; i++) ids.set(`k${i}`, await producer.enqueue(trx, 'fault.work', { key: `k${i}` }, { maxAttempts: 1 }));
    });
    const { started } = await killMidWork(env, (c) => (child = c));
    expect(started.length).toBeGreaterThan(0);

    const failedForGood: string[] = [];
    const second = env.queue({ lockMs: LOCK_MS, maintenanceIntervalSeconds: 1, ...survivorClock(env) }, env.storage.reopen());
    second.work<{ key: string }>(
      'fault.work',
      async (data, job) => {
        await sql`insert into fault_done (key, attempt, pid) values (${data.key}, ${job.attempt}, ${process.pid})`.execute(db);
      },
      { concurrency: CONCURRENCY, onFailed: async (data) => void failedForGood.push((data as { key: string }).key) },
    );
    await second.start();
    // The jobs the dead worker held used their only attempt: each must end failed, and its
    // onFailed must run, so whatever the job stood for can record the failure.
    await waitFor(async () => started.every((k) => failedForGood.includes(k)) || undefined, 20_000, 'onFailed for every job lost on its last attempt');
    for (const key of started) {
      const job = await waitFor(async () => ((await env!.job(ids.get(key)!))?.state === 'failed' ? env!.job(ids.get(key)!) : undefined), 10_000, `${key} failed`);
      expect(job?.state).toBe('failed');
    }
    const { rows } = await sql<{ key: string }>`select key from fault_done where pid = ${process.pid}`.execute(db);
    expect(rows.map((r) => r.key).filter((k) => started.includes(k))).toEqual([]);
  });
});

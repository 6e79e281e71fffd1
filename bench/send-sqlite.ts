// Send acceptance on the embedded default (SQLite): Clarion against the bare route, optionally
// against the code before a change too (BENCH_BEFORE_REF), all in the same alternating rounds.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { Checkout } from './before.js';
import { CLARION_LOG_LEVEL, type Rounds, type Target, alternate, bannerKey, freePort, serveClarion, start, stop } from './lib.js';
import { BENCH, SEND_BODY } from './settings.js';

/** How long the drain after the load is watched: long enough for a steady rate, short enough for the bench. */
const DRAIN_WATCH_MS = 30_000;

/**
 * Reads the server's SQLite file (WAL allows a reader beside the writer) while the workers
 * process the backlog left by the load: until all `total` accepted sends are processed, or for
 * DRAIN_WATCH_MS. Sends still in the intake journal have no message row yet, so the total comes
 * from the load generator's 2xx count.
 */
async function drainBacklog(file: string, total: number) {
  const db = new Database(file, { readonly: true });
  const processed = () => (db.prepare(`select count(*) as done from messages where state = 'processed'`).get() as { done: number }).done;
  const doneAtEnd = processed();
  const started = performance.now();
  let done = doneAtEnd;
  while (done < total && performance.now() - started < DRAIN_WATCH_MS) {
    await new Promise((r) => setTimeout(r, 100));
    done = processed();
  }
  db.close();
  const seconds = (performance.now() - started) / 1000;
  const drainRate = (done - doneAtEnd) / Math.max(seconds, 0.001);
  return { total, doneAtEnd, drainRate, secondsLeft: (total - doneAtEnd) / Math.max(drainRate, 1) };
}

export interface SqliteSendResult {
  /** Targets: 0 bare route, 1 Clarion, then Clarion at warn (quiet) and before (when run). */
  embedded: Rounds;
  quietIndex?: number;
  beforeIndex?: number;
  before?: { ref: string; commit: string };
  apiOnly: Rounds;
  backlog: Awaited<ReturnType<typeof drainBacklog>>;
}

/** Starts the bare route (same validation as POST /send, stores nothing). */
export async function startBareRoute(): Promise<Target> {
  const port = await freePort();
  const baseline = await start('bench/baseline-server.ts', [], { PORT: String(port) }, /listening/);
  return { name: 'bare route', url: `http://127.0.0.1:${port}/send`, child: baseline.child };
}

export async function sqliteSend(bare: Target, before?: Checkout): Promise<SqliteSendResult> {
  const dirs: string[] = [];
  const dataDir = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-'));
    dirs.push(dir);
    return dir;
  };
  const started: Target[] = [];
  try {
    const afterDir = dataDir();
    // The embedded default: one process, API and workers, SQLite file. In-app deliveries run while it accepts.
    const after = await serveClarion({ CLARION_DATA_DIR: afterDir, DATABASE_URL: '' });
    const target: Target = { name: 'Clarion', url: `${after.base}/send`, child: after.child, headers: { authorization: `Bearer ${await bannerKey(after.out)}` } };
    started.push(target);
    const targets = [bare, target];
    // The same code without request lines, in the same rounds: what the default level costs.
    let quietIndex: number | undefined;
    if (CLARION_LOG_LEVEL !== 'warn') {
      const quiet = await serveClarion({ CLARION_DATA_DIR: dataDir(), DATABASE_URL: '', LOG_LEVEL: 'warn' });
      const quietTarget: Target = { name: 'Clarion at warn', url: `${quiet.base}/send`, child: quiet.child, headers: { authorization: `Bearer ${await bannerKey(quiet.out)}` } };
      started.push(quietTarget);
      quietIndex = targets.push(quietTarget) - 1;
    }
    let beforeIndex: number | undefined;
    if (before) {
      const old = await serveClarion({ CLARION_DATA_DIR: dataDir(), DATABASE_URL: '' }, before.root);
      const beforeTarget: Target = { name: `Clarion before (${before.commit.slice(0, 7)})`, url: `${old.base}/send`, child: old.child, headers: { authorization: `Bearer ${await bannerKey(old.out)}` } };
      started.push(beforeTarget);
      beforeIndex = targets.push(beforeTarget) - 1;
    }
    // Warm-up (JIT, first pages of the file), not measured; the one after the change is counted for the backlog.
    const warm = await alternate(targets, { rounds: 1, seconds: 2, connections: BENCH.connections, body: SEND_BODY, rampSeconds: 0 });
    const embedded = await alternate(targets, { rounds: BENCH.rounds, seconds: BENCH.roundSeconds, connections: BENCH.connections, body: SEND_BODY });
    // Freeze the others while the changed code drains, so the drain rate is its alone.
    for (const t of started.slice(1)) t.child.kill('SIGSTOP');
    // While the API is busy its workers take a small share of the time (src/load.ts, BusyGate):
    // report how much was delivered during the load and how long the rest took once it stopped.
    const backlog = await drainBacklog(path.join(afterDir, 'clarion.sqlite'), warm.results[1].summary.accepted + embedded.results[1].summary.accepted);
    for (const t of started.splice(0)) {
      t.child.kill('SIGCONT');
      await stop(t.child);
    }
    // For comparison: the API process alone (CLARION_ROLE=api; workers would run elsewhere).
    const api = await serveClarion({ CLARION_DATA_DIR: afterDir, DATABASE_URL: '', CLARION_ROLE: 'api' });
    const apiTarget: Target = { ...target, url: `${api.base}/send`, child: api.child };
    started.push(apiTarget);
    await alternate([apiTarget], { rounds: 1, seconds: 2, connections: BENCH.connections, body: SEND_BODY, rampSeconds: 0 });
    const apiOnly = await alternate([bare, apiTarget], { rounds: BENCH.rounds, seconds: BENCH.roundSeconds, connections: BENCH.connections, body: SEND_BODY });
    return { embedded, quietIndex, beforeIndex, apiOnly, backlog, ...(before ? { before: { ref: before.ref, commit: before.commit } } : {}) };
  } finally {
    for (const t of started) {
      t.child.kill('SIGCONT');
      await stop(t.child);
    }
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  }
}

// Cost as the work grows: the same Clarion on an empty store and on one bulk-loaded with
// BENCH_SEED users and delivered messages (default 1,000,000), send acceptance in the same
// alternating rounds, and log queries by user and date range over the grown store through the
// API (POST /logs/query, then GET /logs/query/{id} until Complete, as the pingram SDK does).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Rounds, type Target, alternate, bannerKey, fmt, median, runClarion, serveClarion, stop } from './lib.js';
import { SEED_DAYS, seedPostgres, seedSqlite, seededUser } from './seed.js';
import { BENCH, SEND_BODY } from './settings.js';

export interface LogQueryTiming {
  /** Wall time from POST /logs/query to the first page of its Complete result, per query, ms. */
  ms: number[];
  logs: number[];
}

export interface SeededResult {
  engine: 'sqlite' | 'postgres';
  size: number;
  seedSeconds: number;
  queries: LogQueryTiming;
  /** Targets: 0 empty store, 1 seeded store. */
  acceptance: Rounds;
}

/** Log queries by user and date range (the seed's whole span), each for a different seeded user. */
async function logQueries(base: string, headers: Record<string, string>, startMs: number, size: number, count = 5): Promise<LogQueryTiming> {
  const timing: LogQueryTiming = { ms: [], logs: [] };
  const range = [Math.floor(startMs / 1000), Math.ceil((startMs + SEED_DAYS * 86_400_000) / 1000)];
  for (let q = 0; q < count; q++) {
    const user = seededUser(Math.floor(((q + 0.5) * size) / count));
    const started = performance.now();
    const res = await fetch(`${base}/logs/query`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ userFilter: user, dateRangeFilter: range }) });
    if (res.status !== 200) throw new Error(`POST /logs/query answered ${res.status}: ${await res.text()}`);
    const { queryId } = (await res.json()) as { queryId: string };
    for (;;) {
      const page = (await (await fetch(`${base}/logs/query/${queryId}`, { headers })).json()) as { status: string; logs?: unknown[]; error?: string };
      if (page.status === 'Complete') {
        timing.ms.push(performance.now() - started);
        timing.logs.push(page.logs!.length);
        break;
      }
      if (page.status !== 'Running') throw new Error(`log query ${queryId}: ${JSON.stringify(page)}`);
      if (performance.now() - started > 120_000) throw new Error(`log query ${queryId} still Running after 120 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  return timing;
}

/** SQLite: two data directories, one left empty, one migrated, given an account and bulk-loaded. */
export async function seededSqlite(): Promise<SeededResult> {
  const emptyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-empty-'));
  const seededDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-seeded-'));
  const started: Target[] = [];
  try {
    const env = { CLARION_DATA_DIR: seededDir, DATABASE_URL: '' };
    await runClarion(['migrate'], env);
    const account = JSON.parse(await runClarion(['init', '--json'], env)) as { accountId: string; clientId: string; apiKey: string };
    const startMs = Date.now() - SEED_DAYS * 86_400_000 - 60_000;
    const t0 = performance.now();
    seedSqlite(path.join(seededDir, 'clarion.sqlite'), { accountId: account.accountId, envId: account.clientId, size: BENCH.seedSize, startMs });
    const seedSeconds = (performance.now() - t0) / 1000;
    return await measure('sqlite', startMs, seedSeconds, { CLARION_DATA_DIR: emptyDir, DATABASE_URL: '' }, env, account.apiKey, started);
  } finally {
    for (const t of started) {
      t.child.kill('SIGCONT');
      await stop(t.child);
    }
    fs.rmSync(emptyDir, { recursive: true, force: true });
    fs.rmSync(seededDir, { recursive: true, force: true });
  }
}

/** PostgreSQL: two databases made for the run (and dropped by the caller), one bulk-loaded. */
export async function seededPostgres(emptyUrl: string, seededUrl: string): Promise<SeededResult> {
  const started: Target[] = [];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-pg-'));
  try {
    const env = { CLARION_DATA_DIR: dataDir, DATABASE_URL: seededUrl };
    await runClarion(['migrate'], env);
    const account = JSON.parse(await runClarion(['init', '--json'], env)) as { accountId: string; clientId: string; apiKey: string };
    const startMs = Date.now() - SEED_DAYS * 86_400_000 - 60_000;
    const t0 = performance.now();
    await seedPostgres(seededUrl, { accountId: account.accountId, envId: account.clientId, size: BENCH.seedSize, startMs });
    const seedSeconds = (performance.now() - t0) / 1000;
    return await measure('postgres', startMs, seedSeconds, { CLARION_DATA_DIR: dataDir, DATABASE_URL: emptyUrl }, env, account.apiKey, started);
  } finally {
    for (const t of started) {
      t.child.kill('SIGCONT');
      await stop(t.child);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function measure(engine: 'sqlite' | 'postgres', startMs: number, seedSeconds: number, emptyEnv: NodeJS.ProcessEnv, seededEnv: NodeJS.ProcessEnv, seededKey: string, started: Target[]): Promise<SeededResult> {
  const seeded = await serveClarion(seededEnv);
  const seededTarget: Target = { name: 'seeded', url: `${seeded.base}/send`, child: seeded.child, headers: { authorization: `Bearer ${seededKey}` } };
  started.push(seededTarget);
  // Before any load: a query waits for sends accepted in the minutes before it to be ingested.
  await logQueries(seeded.base, seededTarget.headers!, startMs, BENCH.seedSize, 1); // warm-up
  const queries = await logQueries(seeded.base, seededTarget.headers!, startMs, BENCH.seedSize);
  const empty = await serveClarion(emptyEnv);
  const emptyTarget: Target = { name: 'empty', url: `${empty.base}/send`, child: empty.child, headers: { authorization: `Bearer ${await bannerKey(empty.out)}` } };
  started.push(emptyTarget);
  const targets = [emptyTarget, seededTarget];
  await alternate(targets, { rounds: 1, seconds: 2, connections: BENCH.connections, body: SEND_BODY, rampSeconds: 0 }); // warm-up
  const acceptance = await alternate(targets, { rounds: BENCH.rounds, seconds: BENCH.roundSeconds, connections: BENCH.connections, body: SEND_BODY });
  return { engine, size: BENCH.seedSize, seedSeconds, queries, acceptance };
}

export function printSeeded(r: SeededResult): void {
  const [empty, seeded] = r.acceptance.results.map((x) => x.summary);
  const ratio = r.acceptance.ratio(1, 0);
  const cpu = (x: { cpuUsPerRequest?: number }) => (x.cpuUsPerRequest === undefined ? '' : `, ${fmt(x.cpuUsPerRequest, 0)} µs CPU/request`);
  console.log(`\nCost as the work grows (${r.engine}): ${r.size.toLocaleString('en')} users and ${r.size.toLocaleString('en')} delivered messages bulk-loaded in ${fmt(r.seedSeconds, 0)} s`);
  console.log(`  log query by user and ${SEED_DAYS}-day range, through the API (POST /logs/query until Complete): median ${fmt(median(r.queries.ms), 0)} ms, worst ${fmt(Math.max(...r.queries.ms), 0)} ms over ${r.queries.ms.length} users (target < 1000 ms); logs found: ${r.queries.logs.join(' ')}`);
  console.log(`  send acceptance, empty store : ${fmt(empty.requestsPerSecond, 0)} req/s  p50 ${empty.p50Ms} ms  p99 ${empty.p99Ms} ms${cpu(empty)}`);
  console.log(`  send acceptance, seeded store: ${fmt(seeded.requestsPerSecond, 0)} req/s  p50 ${seeded.p50Ms} ms  p99 ${seeded.p99Ms} ms${cpu(seeded)}`);
  console.log(`  seeded vs empty ${fmt(ratio.median * 100)}%, median of ${r.acceptance.ratio(1, 0).each.length} alternating rounds (target >= 90%); rounds (%): ${ratio.each.map((x) => fmt(x * 100, 0)).join(' ')}`);
}

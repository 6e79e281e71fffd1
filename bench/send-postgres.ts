// Send acceptance on PostgreSQL: Clarion (one process with its workers, then CLARION_ROLE=api)
// against a bare route that commits each request with one INSERT through pipelined pg clients
// (pg-baseline-server.ts), in the same alternating rounds, in a database made for the run and
// dropped after it.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { type Rounds, type Target, alternate, bannerKey, freePort, serveClarion, start, stop } from './lib.js';
import { BENCH, SEND_BODY } from './settings.js';

/** A database created for the run; `drop()` removes it (connections closed by force). */
export interface BenchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** Whether PostgreSQL answers at BENCH_PG_URL: null if so, else why not. */
export async function postgresUnreachable(): Promise<string | null> {
  const client = new pg.Client({ connectionString: BENCH.postgresUrl, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('select 1');
    return null;
  } catch (err) {
    return `no PostgreSQL at ${BENCH.postgresUrl.replace(/:[^:@/]*@/, ':***@')} (${(err as Error).message}); set BENCH_PG_URL to an admin connection`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function createDatabase(label: string): Promise<BenchDatabase> {
  const name = `clarion_bench_${label}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: BENCH.postgresUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(BENCH.postgresUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: BENCH.postgresUrl });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

export interface PostgresSendResult {
  /** Targets: 0 raw pg route, 1 Clarion one process. */
  embedded: Rounds;
  /** Targets: 0 raw pg route, 1 Clarion CLARION_ROLE=api. */
  apiOnly: Rounds;
}

export async function postgresSend(): Promise<PostgresSendResult> {
  const db = await createDatabase('send');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-bench-pg-'));
  const started: Target[] = [];
  try {
    const port = await freePort();
    const raw = await start('bench/pg-baseline-server.ts', [], { PORT: String(port), DATABASE_URL: db.url }, /listening/);
    const bare: Target = { name: 'raw pg route', url: `http://127.0.0.1:${port}/send`, child: raw.child };
    started.push(bare);
    const one = await serveClarion({ CLARION_DATA_DIR: dataDir, DATABASE_URL: db.url });
    const headers = { authorization: `Bearer ${await bannerKey(one.out)}` };
    const oneTarget: Target = { name: 'Clarion', url: `${one.base}/send`, child: one.child, headers };
    started.push(oneTarget);
    const opts = { rounds: BENCH.rounds, seconds: BENCH.roundSeconds, connections: BENCH.connections, body: SEND_BODY };
    await alternate([bare, oneTarget], { ...opts, rounds: 1, seconds: 2, rampSeconds: 0 }); // warm-up
    const embedded = await alternate([bare, oneTarget], opts);
    oneTarget.child.kill('SIGCONT');
    await stop(oneTarget.child);
    started.pop();
    const api = await serveClarion({ CLARION_DATA_DIR: dataDir, DATABASE_URL: db.url, CLARION_ROLE: 'api' });
    const apiTarget: Target = { name: 'Clarion api', url: `${api.base}/send`, child: api.child, headers };
    started.push(apiTarget);
    await alternate([apiTarget], { ...opts, rounds: 1, seconds: 2, rampSeconds: 0 }); // warm-up
    const apiOnly = await alternate([bare, apiTarget], opts);
    return { embedded, apiOnly };
  } finally {
    for (const t of started) {
      t.child.kill('SIGCONT');
      await stop(t.child);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
    await db.drop();
  }
}

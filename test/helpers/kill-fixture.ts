import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { holdingSink } from './holding-smtp-sink.js';
import { freePort, spawnCli, waitForOutput } from './process.js';
import { scratchDatabase } from './scratch-database.js';
import type { Dialect } from '../../src/storage/db.js';

/** What a kill -9 test's server processes share: a data directory, a database, a holding SMTP sink. */
export interface KillFixture {
  dataDir: string;
  /** The scratch PostgreSQL database (postgres), or '' (SQLite in dataDir). Set in beforeAll. */
  databaseUrl: string;
  /** Set in beforeAll. */
  sink: Awaited<ReturnType<typeof holdingSink>>;
  /** Servers the test started: each is killed at the end, whatever happened. */
  servers: ChildProcess[];
  /**
   * What every server of the test runs with: the shared data directory, database and sink, one
   * secret key, job locks of 2 s (a killed server's jobs come back soon), and `extra`.
   */
  env(extra?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;
  /** `clarion serve` on a free port, once `ready` is printed (the first start: the banner with the bootstrap key). */
  serve(env: NodeJS.ProcessEnv, ready: RegExp): Promise<{ child: ChildProcess; port: number; out: string }>;
  /** SIGKILL, resolved once the process is gone. */
  kill(child: ChildProcess): Promise<void>;
}

/** Each mail kept its Message-ID however many times it arrived (a redelivery is the same message). */
export function expectOneMessageIdPerSubject(received: { subject: string; messageId: string }[]): void {
  const bySubject = new Map<string, Set<string>>();
  for (const m of received) bySubject.set(m.subject, (bySubject.get(m.subject) ?? new Set()).add(m.messageId));
  for (const [subject, ids] of bySubject) expect(ids.size, `${subject} kept one Message-ID`).toBe(1);
}

/**
 * Registers the beforeAll/afterAll of a kill -9 test (call it in the describe): the sink answers
 * the first `answered` messages and holds the rest until told; on PostgreSQL a scratch database.
 */
export function killFixture(kind: Dialect, name: string, answered: number): KillFixture {
  const secretKey = randomBytes(32).toString('hex');
  const fixture = { dataDir: fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`)), databaseUrl: '', servers: [] } as unknown as KillFixture;
  fixture.env = (extra = {}) => ({
    CLARION_DATA_DIR: fixture.dataDir,
    DATABASE_URL: fixture.databaseUrl,
    SMTP_URL: fixture.sink.url,
    CLARION_ALLOW_PRIVATE_NETWORKS: 'true',
    CLARION_JOB_LOCK_SECONDS: '2',
    CLARION_SECRET_KEY: secretKey,
    ...extra,
  });
  fixture.serve = async (env, ready) => {
    const port = await freePort();
    const child = spawnCli(['serve'], { ...env, PORT: String(port) });
    fixture.servers.push(child);
    return { child, port, out: await waitForOutput(child, ready, 60_000) };
  };
  fixture.kill = async (child) => {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  };
  let scratch: Awaited<ReturnType<typeof scratchDatabase>> | undefined;
  beforeAll(async () => {
    fixture.sink = await holdingSink(answered);
    if (kind === 'postgres') {
      scratch = await scratchDatabase(name.replace(/-/g, '_'));
      fixture.databaseUrl = scratch.url;
    }
  });
  afterAll(async () => {
    for (const server of fixture.servers) if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
    await fixture.sink?.close();
    fs.rmSync(fixture.dataDir, { recursive: true, force: true });
    await scratch?.drop();
  });
  return fixture;
}

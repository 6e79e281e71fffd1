import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { holdingSink } from './holding-smtp-sink.js';
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
}

/**
 * Registers the beforeAll/afterAll of a kill -9 test (call it in the describe): the sink answers
 * the first `answered` messages and holds the rest until told; on PostgreSQL a scratch database.
 */
export function killFixture(kind: Dialect, name: string, answered: number): KillFixture {
  const fixture = { dataDir: fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`)), databaseUrl: '', servers: [] } as unknown as KillFixture;
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

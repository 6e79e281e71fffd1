import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { type Clock, type Deps, buildDeps } from '../../src/deps.js';
import type { App } from '../../src/http/types.js';
import { type CreatedAccount, createAccountWithEnvironment } from '../../src/modules/accounts/bootstrap.js';
import { Secrets } from '../../src/secrets.js';
import type { Dialect } from '../../src/storage/db.js';
import { type TestStorage, createTestStorage } from './storage.js';

export interface TestContext {
  kind: Dialect;
  deps: Deps;
  app: App;
  storage: TestStorage;
  /** The first account: one environment and one API key. */
  account: CreatedAccount;
  /** `{authorization: 'Bearer <key>'}` for the first account. */
  auth: { authorization: string };
  newAccount(name?: string): Promise<CreatedAccount>;
  close(): Promise<void>;
}

export function testConfig(overrides: Partial<Config> = {}): Config {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-data-'));
  return { ...loadConfig({ CLARION_DATA_DIR: dataDir, LOG_LEVEL: 'silent' }), ...overrides };
}

export async function createTestContext(kind: Dialect, options: { config?: Partial<Config>; clock?: Clock } = {}): Promise<TestContext> {
  const storage = await createTestStorage(kind);
  const config = testConfig(options.config);
  const deps = buildDeps(config, {
    storage,
    logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    secrets: new Secrets(randomBytes(32)),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  const app = await buildApp(deps);
  await app.ready();
  const account = await createAccountWithEnvironment(deps, { name: 'Test account' });
  return {
    kind,
    deps,
    app,
    storage,
    account,
    auth: { authorization: `Bearer ${account.apiKey}` },
    newAccount: (name = 'Other account') => createAccountWithEnvironment(deps, { name }),
    async close() {
      await app.close();
      await storage.destroy();
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    },
  };
}

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  constructor(private current = new Date('2026-01-15T10:00:00.000Z')) {}
  now(): Date {
    return new Date(this.current);
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
  set(date: Date): void {
    this.current = new Date(date);
  }
}

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import type { EmailStores } from '../../src/channels/email/registry.js';
import { type Config, loadConfig } from '../../src/config.js';
import { type Clock, type Deps, buildDeps } from '../../src/deps.js';
import type { App } from '../../src/http/types.js';
import type { QueueOptions } from '../../src/queue/index.js';
import { type CreatedAccount, createAccountWithEnvironment } from '../../src/modules/accounts/bootstrap.js';
import { Secrets } from '../../src/secrets.js';
import { type Services, buildServices } from '../../src/services.js';
import { type Workers, startWorkers } from '../../src/workers.js';
import type { Dialect } from '../../src/storage/db.js';
import { type TestStorage, createTestStorage } from './storage.js';

export interface TestContext {
  kind: Dialect;
  deps: Deps;
  /** The services object of this context, built once: its app and workers share it. */
  services: Services;
  app: App;
  storage: TestStorage;
  /** The first account: one environment and one API key. */
  account: CreatedAccount;
  /** `{authorization: 'Bearer <key>'}` for the first account. */
  auth: { authorization: string };
  /** Started with `{workers: true}`: the delivery workers of this context (a test may replace them; close() stops the current ones). */
  workers?: Workers;
  newAccount(name?: string): Promise<CreatedAccount>;
  close(): Promise<void>;
}

export function testConfig(overrides: Partial<Config> = {}): Config {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-data-'));
  return { ...loadConfig({ CLARION_DATA_DIR: dataDir, LOG_LEVEL: 'silent', CLARION_INBOUND_SMTP_PORT: 'off' }), ...overrides };
}

export interface TestContextOptions {
  config?: Partial<Config>;
  clock?: Clock;
  /** Start the delivery workers (queue polling, channel executors); retries back off from 10 ms. */
  workers?: boolean;
  /** The server's logger (default: silent, or TEST_LOG_LEVEL), e.g. one writing to a stream a test reads. */
  logger?: pino.Logger;
  /** Queue options, e.g. a short job backoff for a test that runs a job to its last attempt. */
  queue?: QueueOptions;
}

export async function createTestContext(kind: Dialect, options: TestContextOptions = {}): Promise<TestContext> {
  const storage = await createTestStorage(kind);
  const config = testConfig(options.config);
  const deps = buildDeps(config, {
    storage,
    logger: options.logger ?? pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    secrets: new Secrets(randomBytes(32)),
    ...(options.clock ? { clock: options.clock } : {}),
    // Short polls keep tests quick; pg-boss tables live beside the test schema and go with it.
    queue: { pollIntervalMs: 20, ...(storage.bossSchema ? { bossSchema: storage.bossSchema } : {}), ...options.queue },
  });
  const services = buildServices(deps);
  const app = await buildApp(deps, services);
  await app.ready();
  const account = await createAccountWithEnvironment(deps, { name: 'Test account' });
  const context: TestContext = {
    workers: options.workers ? await startWorkers(deps, services, { retryBaseMs: 10 }) : undefined,
    kind,
    deps,
    services,
    app,
    storage,
    account,
    auth: { authorization: `Bearer ${account.apiKey}` },
    newAccount: (name = 'Other account') => createAccountWithEnvironment(deps, { name }),
    async close() {
      await context.workers?.stop();
      await app.close();
      await storage.destroy();
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    },
  };
  return context;
}

/** The email registry's stores over a context's repositories (the mail catcher's and the SMTP settings). */
export function emailStoresOf(t: Pick<TestContext, 'services'>): EmailStores {
  return { caught: t.services.repositories.mailCatcher, settings: t.services.repositories.emailSettings };
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

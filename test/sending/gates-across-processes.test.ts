// Throttling and deduplication hold across processes: two instances (each its own database
// pool, API and delivery workers, as two `clarion serve` processes have) on one database take
// 100 sends at once, half each, and together deliver exactly the allowed number. On PostgreSQL
// their routing transactions run at the same time and meet on the counter rows.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildDeps } from '../../src/deps.js';
import type { App } from '../../src/http/types.js';
import { Secrets } from '../../src/secrets.js';
import { buildServices } from '../../src/services.js';
import { type Workers, startWorkers } from '../../src/workers.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { routed, sendAtOnce, tally } from '../helpers/gated-sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('throttling and deduplication across two instances on one database (%s)', (kind) => {
  let t: TestContext;
  let otherApp: App;
  let otherWorkers: Workers;
  let other: ReturnType<typeof buildDeps>;
  const clock = new ManualClock(new Date('2026-06-01T09:00:00.000Z'));
  const req = (payload: unknown, url = '/types') => t.app.inject({ method: 'POST', url, headers: t.auth, payload: payload as object });
  /** 100 sends at once, the even ones through this instance and the odd ones through the other. */
  const sendThroughBoth = async (payloads: Record<string, unknown>[]) => {
    const [mine, theirs] = await Promise.all([
      sendAtOnce(t.app, t.auth, payloads.filter((_, i) => i % 2 === 0)),
      sendAtOnce(otherApp, t.auth, payloads.filter((_, i) => i % 2 === 1)),
    ]);
    return [...mine, ...theirs];
  };

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true, clock });
    other = buildDeps(t.deps.config, {
      storage: t.storage.reopen(),
      logger: pino({ level: 'silent' }),
      secrets: new Secrets(randomBytes(32)),
      clock,
      queue: { pollIntervalMs: 20, ...(t.storage.bossSchema ? { bossSchema: t.storage.bossSchema } : {}) },
    });
    const services = buildServices(other);
    otherApp = await buildApp(other, services);
    await otherApp.ready();
    otherWorkers = await startWorkers(other, services, { retryBaseMs: 10 });
    expect((await req({ notificationId: 'capped', title: 'Capped', channels: ['INAPP_WEB'], throttling: { max: 7, period: 1, unit: 'days', forever: false, scope: ['userId', 'notificationId'] } })).statusCode).toBe(200);
    expect((await req({ notificationId: 'once', title: 'Once', channels: ['INAPP_WEB'], deduplication: { duration: 86400 } })).statusCode).toBe(200);
  });
  afterAll(async () => {
    await otherWorkers?.stop();
    await otherApp?.close();
    await other?.storage.close();
    await t.close();
  });

  it('delivers exactly max of 100 throttled sends taken by both', async () => {
    const ids = await sendThroughBoth(Array.from({ length: 100 }, (_, i) => ({ type: 'capped', to: { id: 'ada' }, inapp: { title: `alert ${i}` } })));
    expect(tally(await routed(t.deps, ids, 60_000), 'THROTTLED')).toEqual({ delivered: 7, skipped: 93 });
  });

  it('delivers one of 100 identical sends taken by both', async () => {
    const ids = await sendThroughBoth(Array.from({ length: 100 }, () => ({ type: 'once', to: { id: 'bob' }, inapp: { title: 'Welcome' } })));
    expect(tally(await routed(t.deps, ids, 60_000), 'DEDUPLICATED')).toEqual({ delivered: 1, skipped: 99 });
  });
});

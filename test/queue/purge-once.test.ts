import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeps } from '../../src/deps.js';
import { PURGE_JOB } from '../../src/modules/system/maintenance.jobs.js';
import { buildServices } from '../../src/services.js';
import { type Workers, startWorkers } from '../../src/workers.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/**
 * The hourly retention purge is a job every worker process schedules and one runs: two worker
 * processes (two sets of dependencies over one database) scheduling the same hour make one job.
 */
describe.each(STORAGE_KINDS)('the hourly purge runs once across processes (%s)', (kind) => {
  let t: TestContext;
  let second: Workers;
  let other: ReturnType<typeof buildDeps>;
  const clock = new ManualClock(new Date('2026-03-01T10:15:00.000Z'));

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true, clock });
    other = buildDeps(t.deps.config, { storage: t.storage.reopen(), logger: t.deps.logger, secrets: t.deps.secrets, clock, ...(t.storage.bossSchema ? { queue: { bossSchema: t.storage.bossSchema, pollIntervalMs: 20 } } : {}) });
    second = await startWorkers(other, buildServices(other));
  });
  afterAll(async () => {
    await second?.stop();
    await other?.storage.close();
    await t.close();
  });

  it('makes one purge job an hour whichever process schedules it, and the purge removes expired logs', async () => {
    const send = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'old', to: { id: 'u1' }, inapp: { title: 'old news' } } });
    const trackingId = send.json().trackingId as string;
    const logged = async () => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0];
    await eventually(async () => (await logged())?.inapp_delivered_at, 15_000, 'delivered');

    // Past the retention: this hour's purge, scheduled by both processes, is one job.
    clock.advance((t.deps.config.logRetentionDays + 1) * 24 * 3600 * 1000);
    const ids = [await t.workers!.schedulePurge(), await second.schedulePurge(), await t.workers!.schedulePurge()];
    expect(new Set(ids).size).toBe(1);
    await eventually(async () => ((await logged()) === undefined ? true : undefined), 15_000, 'the expired log purged');

    const table = kind === 'sqlite' ? sql.raw('queue_jobs') : sql.raw(`${t.storage.bossSchema}.job`);
    const { rows } = await sql<{ id: string }>`select id from ${table} where name = ${PURGE_JOB}`.execute(t.deps.db);
    expect(rows).toHaveLength(1);
    // The next hour is another job.
    clock.advance(3600 * 1000);
    expect(await second.schedulePurge()).not.toBe(ids[0]);
  });
});

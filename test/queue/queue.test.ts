import { CompiledQuery } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DeferJobError, type JobContext, PermanentJobError, RetryJobError } from '../../src/queue/index.js';
import type { PgBossQueue } from '../../src/queue/pgboss-queue.js';
import type { JobBackend } from '../../src/queue/runner.js';
import { SqliteQueue } from '../../src/queue/sqlite-queue.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { ManualClock } from '../helpers/context.js';
import { type ClaimWatch, type QueueEnv, deferred, queueEnv, waitFor, watchClaims } from './helpers.js';

/**
 * SQLite with a ManualClock: the job, whose run `attempt` failed, waits exactly `delayMs`; the
 * worker leaves it alone until the clock gets there, then runs it.
 */
async function stepToRetry(env: QueueEnv, clock: ManualClock, claims: ClaimWatch, name: string, id: string, attempt: number, delayMs: number): Promise<void> {
  const waiting = await waitFor(async () => {
    const j = await env.job(id);
    return j?.state === 'waiting' && j.attempt === attempt ? j : undefined;
  }, 10_000, `attempt ${attempt} recorded as failed`);
  expect(waiting.runAt.getTime() - clock.now().getTime()).toBe(delayMs);
  clock.advance(delayMs - 1);
  await claims.polls(name, 3);
  expect(await env.job(id)).toMatchObject({ state: 'waiting', attempt });
  clock.advance(1);
}

describe.each(STORAGE_KINDS)('queue on %s', (kind) => {
  let env: QueueEnv;
  beforeEach(async () => {
    env = await queueEnv(kind);
  });
  afterEach(async () => {
    await env.cleanup();
  });

  it('leaves no job when the transaction rolls back; a committed job runs exactly once', async () => {
    const q = env.queue();
    const claims = watchClaims(q);
    const seen: unknown[] = [];
    const ran = deferred<JobContext>();
    q.work<{ n: number }>('t.once', async (data, job) => {
      seen.push(data);
      ran.resolve(job);
    });
    await q.start();

    await expect(
      env.storage.db.transaction().execute(async (trx) => {
        await q.enqueue(trx, 't.once', { n: 1 });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await env.jobCount()).toBe(0);

    const id = await env.storage.db.transaction().execute((trx) => q.enqueue(trx, 't.once', { n: 2 }));
    const job = await ran.promise;
    expect(job).toMatchObject({ id, name: 't.once', attempt: 1, maxAttempts: 10 });
    await waitFor(async () => (await env.job(id))?.state === 'done', 5000, 'done');
    await claims.polls('t.once', 3); // the worker looked again: nothing runs it again
    expect(claims.claimed.filter((c) => c === id)).toHaveLength(1);
    expect(seen).toEqual([{ n: 2 }]);
    expect(await env.jobCount()).toBe(1);
  });

  it('keeps one job per key: queues in two processes scheduling the same key make one job, run once', async () => {
    const a = env.queue();
    const b = env.queue({}, env.storage.reopen());
    const runs: string[] = [];
    a.work<{ by: string }>('t.keyed', async (data) => void runs.push(data.by));
    const claims = watchClaims(a);
    await a.start();
    const first = await a.enqueue(env.storage.db, 't.keyed', { by: 'a' }, { key: '2026-01-15T10' });
    const second = await b.enqueue(env.storage.db, 't.keyed', { by: 'b' }, { key: '2026-01-15T10' });
    expect(second).toBe(first);
    await waitFor(async () => (await env.job(first))?.state === 'done', 5000, 'the keyed job done');
    // Once done, the same key still inserts nothing; another key is another job.
    expect(await a.enqueue(env.storage.db, 't.keyed', { by: 'a again' }, { key: '2026-01-15T10' })).toBe(first);
    const next = await a.enqueue(env.storage.db, 't.keyed', { by: 'next hour' }, { key: '2026-01-15T11' });
    expect(next).not.toBe(first);
    await waitFor(async () => (await env.job(next))?.state === 'done', 5000, 'the next key done');
    await claims.polls('t.keyed', 3);
    expect(claims.claimed.sort()).toEqual([first, next].sort());
    expect(runs).toEqual(['a', 'next hour']);
    expect(await env.jobCount()).toBe(2);
  });

  it('wakes an idle worker on enqueue instead of waiting a poll interval', async () => {
    // The next poll is an hour away, far beyond this test's timeout: only the enqueue can wake it.
    const q = env.queue({ pollIntervalMs: 3_600_000 });
    const claims = watchClaims(q);
    const ran = deferred<number>();
    q.work('t.wake', async () => ran.resolve(performance.now()));
    const startupPoll = claims.polls('t.wake', 1);
    await q.start();
    await startupPoll;
    const sent = performance.now();
    const id = await env.storage.db.transaction().execute((trx) => q.enqueue(trx, 't.wake', {}));
    const at = await ran.promise;
    expect(at).toBeGreaterThanOrEqual(sent);
    expect(claims.claimed).toEqual([id]);
  });

  it('does not run a job before runAt, and runs it when due', async () => {
    // SQLite reads the queue's clock, moved here by hand: the boundary is exact. pg-boss compares
    // start_after with the server's now(), which no test moves: there the job is due a moment
    // ahead, the test waits for its run, and the server's own record says it started no earlier.
    const clock = kind === 'sqlite' ? new ManualClock(new Date('2026-01-15T10:00:00.000Z')) : undefined;
    const now = () => (clock ? clock.now() : new Date());
    const q = env.queue(clock ? { clock } : {});
    const claims = watchClaims(q);
    const runs: string[] = [];
    const ran = deferred<number>();
    q.work<{ which: string }>('t.later', async (data) => {
      runs.push(data.which);
      if (data.which === 'soon') ran.resolve(now().getTime());
    });
    await q.start();
    const far = await q.enqueue(env.storage.db, 't.later', { which: 'far' }, { runAt: new Date(now().getTime() + 3_600_000) });
    const runAt = new Date(now().getTime() + 200);
    const id = await q.enqueue(env.storage.db, 't.later', { which: 'soon' }, { runAt });
    if (clock) {
      clock.advance(199);
      await claims.polls('t.later', 3);
      expect((await env.job(id))?.state).toBe('waiting');
      expect(runs).toEqual([]);
      clock.advance(1);
    }
    const at = await ran.promise;
    expect(at).toBeGreaterThanOrEqual(runAt.getTime() - (clock ? 0 : 5));
    if (kind === 'postgres') {
      const [row] = await env.raw<{ start_after: Date; not_early: boolean }>(
        `select start_after, started_on >= start_after as not_early from ${env.bossSchema}.job where id = $1`,
        [id.slice(-36)],
      );
      expect(new Date(row.start_after).getTime()).toBe(runAt.getTime());
      expect(row.not_early).toBe(true);
    }
    // A job not yet due is never fetched while due ones are.
    await claims.polls('t.later', 3);
    expect((await env.job(far))?.state).toBe('waiting');
    expect(claims.claimed).toEqual([id]);
    expect(runs).toEqual(['soon']);
  });

  it('runs a job that came due while other names keep being nudged (steady traffic does not put off the poll of every name)', async () => {
    // A job that came due is found only by the poll of every name (no nudge names it then). Every
    // enqueue and completion nudges its own name; those nudges once put that poll off each time,
    // so under traffic more frequent than the poll interval (20 ms here) it never ran.
    const clock = kind === 'sqlite' ? new ManualClock(new Date('2026-01-15T10:00:00.000Z')) : undefined;
    const now = () => (clock ? clock.now() : new Date());
    const q = env.queue(clock ? { clock } : {});
    const ran = deferred<void>();
    let busyRuns = 0;
    q.work('t.came-due', async () => ran.resolve());
    q.work('t.busy', async () => void busyRuns++, { concurrency: 4 });
    await q.start();
    await q.enqueue(env.storage.db, 't.came-due', {}, { runAt: new Date(now().getTime() + (clock ? 1000 : 300)) });
    clock?.advance(1000);
    let done = false;
    void ran.promise.then(() => (done = true));
    // Traffic on another name, a nudge every few ms, until the job runs or long past any poll.
    let rounds = 0;
    for (; !done && rounds < 400; rounds++) {
      await q.enqueue(env.storage.db, 't.busy', { rounds });
      await new Promise((r) => setTimeout(r, 2));
    }
    expect(done, `the job that came due ran while t.busy was nudged (${rounds} rounds, ${busyRuns} busy runs)`).toBe(true);
  });

  it('retries a thrown error with exponential backoff and counts attempts', async () => {
    // random() = 1: the full-jitter delay is its ceiling, base * 2^(attempt-1) = 40 ms, 80 ms.
    // SQLite: the queue's clock is moved by hand, so each wait is exact. pg-boss waits on the
    // server's clock: the gaps between runs are at least the delays (load only lengthens them).
    const clock = kind === 'sqlite' ? new ManualClock() : undefined;
    const q = env.queue({ backoff: { baseMs: 40 }, random: () => 1, ...(clock ? { clock } : {}) });
    const claims = watchClaims(q);
    const runs: { attempt: number; at: number }[] = [];
    const ok = deferred();
    q.work('t.flaky', async (_data, job) => {
      runs.push({ attempt: job.attempt, at: (clock ? clock.now() : new Date()).getTime() });
      if (job.attempt < 3) throw new Error(`boom ${job.attempt}`);
      ok.resolve();
    });
    await q.start();
    const id = await q.enqueue(env.storage.db, 't.flaky', {}, { maxAttempts: 5 });
    if (clock) {
      await stepToRetry(env, clock, claims, 't.flaky', id, 1, 40);
      await stepToRetry(env, clock, claims, 't.flaky', id, 2, 80);
    }
    await ok.promise;
    expect(runs.map((r) => r.attempt)).toEqual([1, 2, 3]);
    expect(runs[1].at - runs[0].at).toBeGreaterThanOrEqual(40 - (clock ? 0 : 5));
    expect(runs[2].at - runs[1].at).toBeGreaterThanOrEqual(80 - (clock ? 0 : 5));
    if (clock) expect([runs[1].at - runs[0].at, runs[2].at - runs[1].at]).toEqual([40, 80]);
    const stored = await waitFor(async () => {
      const j = await env.job(id);
      return j?.state === 'done' ? j : undefined;
    });
    expect(stored.attempt).toBe(3);
  });

  it('ends failed with the last error once maxAttempts are used', async () => {
    const q = env.queue({ backoff: { baseMs: 5 } });
    const claims = watchClaims(q);
    const attempts: number[] = [];
    q.work('t.broken', async (_d, job) => {
      attempts.push(job.attempt);
      throw new Error(`still broken (${job.attempt})`);
    });
    await q.start();
    const id = await q.enqueue(env.storage.db, 't.broken', {}, { maxAttempts: 3 });
    const stored = await waitFor(async () => {
      const j = await env.job(id);
      return j?.state === 'failed' ? j : undefined;
    });
    await claims.polls('t.broken', 3);
    expect(claims.claimed).toEqual([id, id, id]);
    expect(attempts).toEqual([1, 2, 3]);
    expect(stored.attempt).toBe(3);
    expect(stored.lastError).toContain('still broken (3)');
  });

  it('stops at once on PermanentJobError', async () => {
    const q = env.queue({ backoff: { baseMs: 5 } });
    const claims = watchClaims(q);
    const attempts: number[] = [];
    q.work('t.permanent', async (_d, job) => {
      attempts.push(job.attempt);
      throw new PermanentJobError('bad address');
    });
    await q.start();
    const id = await q.enqueue(env.storage.db, 't.permanent', {}, { maxAttempts: 5 });
    const stored = await waitFor(async () => {
      const j = await env.job(id);
      return j?.state === 'failed' ? j : undefined;
    });
    await claims.polls('t.permanent', 3);
    expect(claims.claimed).toEqual([id]);
    expect(attempts).toEqual([1]);
    expect(stored.lastError).toContain('bad address');
  });

  it("honours RetryJobError.delayMs over the queue's backoff", async () => {
    // The backoff alone would wait 10 s; the handler asks for 150 ms. SQLite: the queue's clock is
    // moved by hand (exactly 150 ms); pg-boss: the gap is at least that on the server's clock.
    const clock = kind === 'sqlite' ? new ManualClock() : undefined;
    const q = env.queue({ backoff: { baseMs: 10_000 }, random: () => 1, ...(clock ? { clock } : {}) });
    const claims = watchClaims(q);
    const runs: number[] = [];
    const second = deferred();
    q.work('t.later-please', async (_d, job) => {
      runs.push((clock ? clock.now() : new Date()).getTime());
      if (job.attempt === 1) throw new RetryJobError('rate limited', 150);
      second.resolve();
    });
    await q.start();
    const id = await q.enqueue(env.storage.db, 't.later-please', {});
    if (clock) await stepToRetry(env, clock, claims, 't.later-please', id, 1, 150);
    await second.promise;
    expect(runs).toHaveLength(2);
    expect(runs[1] - runs[0]).toBeGreaterThanOrEqual(150 - (clock ? 0 : 5));
    if (clock) expect(runs[1] - runs[0]).toBe(150);
  });

  it('DeferJobError gives the job back behind the jobs due before it, without counting the run as an attempt', async () => {
    // SQLite orders due jobs by run_at: its clock moves 1 ms between the enqueue and each
    // deferral, so the deferred job's run_at is strictly later. pg-boss stamps created_on anew.
    const clock = kind === 'sqlite' ? new ManualClock() : undefined;
    const q = env.queue({ backoff: { baseMs: 5 }, ...(clock ? { clock } : {}) });
    const runs: string[] = [];
    const done = deferred();
    q.work<{ job: string }>(
      't.defer',
      async (data, job) => {
        runs.push(`${data.job}@${job.attempt}`);
        // 'first' gives way four times, more than its two attempts would allow as retries.
        if (data.job === 'first' && runs.filter((r) => r.startsWith('first')).length <= 4) {
          clock?.advance(1);
          throw new DeferJobError('not now');
        }
        if (runs.length === 6) done.resolve();
      },
      { concurrency: 1 },
    );
    const [first, second] = await env.storage.db.transaction().execute(async (trx) => [
      await q.enqueue(trx, 't.defer', { job: 'first' }, { maxAttempts: 2 }),
      await q.enqueue(trx, 't.defer', { job: 'second' }, { maxAttempts: 2 }),
    ]);
    await q.start();
    await done.promise;
    // Deferred once, 'first' runs after 'second', which was due before the deferral.
    expect(runs).toEqual(['first@1', 'second@1', 'first@1', 'first@1', 'first@1', 'first@1']);
    for (const id of [first, second]) {
      const stored = await waitFor(async () => {
        const j = await env.job(id);
        return j?.state === 'done' ? j : undefined;
      }, 5000, `job ${id} done`);
      expect(stored.attempt).toBe(1);
    }
  });

  it('cancels and reschedules waiting jobs only', async () => {
    const q = env.queue();
    const got: { data: unknown; id: string }[] = [];
    const gate = deferred();
    const started = deferred<string>();
    const ran = deferred();
    q.work('t.sched', async (data, job) => {
      got.push({ data, id: job.id });
      ran.resolve();
    });
    q.work('t.slow', async (_d, job) => {
      started.resolve(job.id);
      await gate.promise;
    });
    await q.start();
    const inAnHour = new Date(Date.now() + 3_600_000);

    const a = await q.enqueue(env.storage.db, 't.sched', { v: 'a' }, { runAt: inAnHour });
    expect(await q.cancel(env.storage.db, a)).toBe(true);
    expect((await env.job(a))?.state).toBe('cancelled');
    expect(await q.cancel(env.storage.db, a)).toBe(false);
    expect(await q.reschedule(env.storage.db, a, new Date())).toBe(false);
    expect(await q.cancel(env.storage.db, 'no-such-job')).toBe(false);

    // A cancel in a rolled-back transaction changes nothing.
    const b = await q.enqueue(env.storage.db, 't.sched', { v: 1 }, { runAt: inAnHour });
    await expect(
      env.storage.db.transaction().execute(async (trx) => {
        expect(await q.cancel(trx, b)).toBe(true);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect((await env.job(b))?.state).toBe('waiting');

    expect(await q.reschedule(env.storage.db, b, new Date(), { v: 2 })).toBe(true);
    await ran.promise;
    expect(got).toEqual([{ data: { v: 2 }, id: b }]);
    await waitFor(async () => (await env.job(b))?.state === 'done');
    expect(await q.cancel(env.storage.db, b)).toBe(false);
    expect(await q.reschedule(env.storage.db, b, inAnHour)).toBe(false);

    const c = await q.enqueue(env.storage.db, 't.slow', {});
    expect(await started.promise).toBe(c);
    expect(await q.cancel(env.storage.db, c)).toBe(false);
    expect(await q.reschedule(env.storage.db, c, inAnHour)).toBe(false);
    expect((await env.job(c))?.state).toBe('running');
    gate.resolve();
    await waitFor(async () => (await env.job(c))?.state === 'done');
  });

  it('respects the per-name concurrency limit', async () => {
    const q = env.queue();
    const claims = watchClaims(q);
    let current = 0;
    let max = 0;
    let started = 0;
    let done = 0;
    const all = deferred();
    // Handlers hold until the test lets their wave go, after the worker has polled again.
    let wave = deferred();
    q.work(
      't.limited',
      async () => {
        current++;
        started++;
        max = Math.max(max, current);
        await wave.promise;
        current--;
        if (++done === 10) all.resolve();
      },
      { concurrency: 3 },
    );
    // Polled after t.limited on every timer poll: a finished claim of it means t.limited was looked at.
    q.work('t.limited.tick', async () => undefined);
    await q.start();
    await env.storage.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 10; i++) await q.enqueue(trx, 't.limited', { i });
    });
    for (const [startedBy, running] of [[3, 3], [6, 3], [9, 3], [10, 1]]) {
      await waitFor(async () => started === startedBy && current === running, 10_000, `${startedBy} started, ${running} running`);
      // Two full polls with the limit reached: none more starts.
      await claims.polls('t.limited.tick', 2);
      expect([started, current]).toEqual([startedBy, running]);
      const going = wave;
      wave = deferred();
      going.resolve();
    }
    await all.promise;
    expect(max).toBe(3);
  });

  it('while busy() spaces job starts so that runs take about busyShare of the time, then runs freely', async () => {
    let busy = true;
    const q = env.queue({ busy: () => busy, busyShare: 0.2 });
    // Each job holds the event loop for 5 ms, as a SQLite-bound delivery does.
    let busyRuns = 0;
    let busyWorkMs = 0;
    let freeRuns = 0;
    q.work(
      't.busy.cpu',
      async () => {
        const began = performance.now();
        while (performance.now() - began < 5) {
          // synchronous work
        }
        if (busy) {
          busyRuns++;
          busyWorkMs += performance.now() - began;
        } else freeRuns++;
      },
      { concurrency: 4 },
    );
    await env.storage.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 200; i++) await q.enqueue(trx, 't.busy.cpu', { i });
    });
    const busySince = performance.now();
    await q.start();
    // About 800 ms of runs at a fifth of the time: the share is measured over that many runs,
    // however long the machine takes for them.
    await waitFor(async () => busyRuns >= 32, 20_000, 'runs while busy');
    busy = false;
    const busyMs = performance.now() - busySince;
    await waitFor(async () => busyRuns + freeRuns === 200, 20_000, 'every job ran');
    // Work went on while busy, at about a fifth of the time (without spacing it takes all of it).
    expect(busyRuns).toBeGreaterThan(3);
    expect(busyWorkMs / busyMs).toBeLessThan(0.35);
    expect(freeRuns).toBeGreaterThan(0);
  });

  it('while busy() still lets jobs that wait on I/O overlap, and runs them at full concurrency after', async () => {
    let busy = true;
    const q = env.queue({ busy: () => busy });
    let current = 0;
    let busyStarts = 0;
    let maxBusyInFlight = 0;
    let maxFree = 0;
    let done = 0;
    const all = deferred();
    // Jobs waiting on I/O: each holds until the test lets its phase go, however long the busy
    // gate spaces starts (up to its longest gap, BusyGate).
    const busyPhase = deferred();
    const freePhase = deferred();
    const handler = async () => {
      current++;
      if (busy) {
        busyStarts++;
        maxBusyInFlight = Math.max(maxBusyInFlight, current);
        await busyPhase.promise;
      } else {
        maxFree = Math.max(maxFree, current);
        await freePhase.promise;
      }
      current--;
      if (++done === 12) all.resolve();
    };
    q.work('t.busy.a', handler, { concurrency: 4 });
    q.work('t.busy.b', handler, { concurrency: 4 });
    await q.start();
    await env.storage.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 6; i++) {
        await q.enqueue(trx, 't.busy.a', { i });
        await q.enqueue(trx, 't.busy.b', { i });
      }
    });
    await waitFor(async () => busyStarts >= 3 && maxBusyInFlight > 1, 10_000, 'progress while busy, runs overlapping');
    busy = false;
    busyPhase.resolve();
    await waitFor(async () => maxFree > 2, 10_000, 'full concurrency once not busy');
    freePhase.resolve();
    await all.promise;
    expect(maxBusyInFlight).toBeGreaterThan(1);
    expect(maxFree).toBeGreaterThan(2);
  });

  it('workBatch: claims and handles jobs in batches, and completes each job of a batch', async () => {
    const q = env.queue();
    const sizes: number[] = [];
    const seen: number[] = [];
    const all = deferred();
    q.workBatch<{ i: number }>(
      't.batch',
      async (items) => {
        sizes.push(items.length);
        for (const item of items) seen.push(item.data.i);
        if (seen.length === 20) all.resolve();
        return items.map(() => undefined);
      },
      { batchSize: 8, concurrency: 1 },
    );
    const ids = await env.storage.db.transaction().execute(async (trx) => {
      const out: string[] = [];
      for (let i = 0; i < 20; i++) out.push(await q.enqueue(trx, 't.batch', { i }));
      return out;
    });
    await q.start();
    await all.promise;
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(Math.max(...sizes)).toBe(8);
    for (const id of ids) await waitFor(async () => (await env.job(id))?.state === 'done', 5000, `job ${id} done`);
  });

  it('workBatch: batches of batchSize while the API is busy, of idleBatchSize once it is not', async () => {
    let busy = true;
    const q = env.queue({ busy: () => busy, busyShare: 0.5 });
    const runs: { size: number; busy: boolean }[] = [];
    let seen = 0;
    const all = deferred();
    q.workBatch<{ i: number }>(
      't.batch.idle',
      async (items) => {
        runs.push({ size: items.length, busy });
        // Two runs while busy, then the API goes quiet: the next claims take the idle size.
        if (runs.length === 2) busy = false;
        seen += items.length;
        if (seen === 30) all.resolve();
        return items.map(() => undefined);
      },
      { batchSize: 2, idleBatchSize: 8, concurrency: 1 },
    );
    await env.storage.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 30; i++) await q.enqueue(trx, 't.batch.idle', { i });
    });
    await q.start();
    await all.promise;
    const busyRuns = runs.filter((r) => r.busy);
    const idleRuns = runs.filter((r) => !r.busy);
    expect(busyRuns.map((r) => r.size)).toEqual([2, 2]);
    expect(idleRuns.slice(0, 3).map((r) => r.size)).toEqual([8, 8, 8]);
    expect(Math.max(...idleRuns.map((r) => r.size))).toBe(8);
  });

  it('workBatch: a job the handler reports failed is retried alone; a batch that throws runs again job by job', async () => {
    const q = env.queue({ backoff: { baseMs: 10, capMs: 20 } });
    const calls: number[][] = [];
    const runs = new Map<number, number>();
    let failedOnce = false;
    q.workBatch<{ i: number }>(
      't.batch.fail',
      async (items) => {
        calls.push(items.map((x) => x.data.i));
        for (const { data } of items) runs.set(data.i, (runs.get(data.i) ?? 0) + 1);
        // Job 0 makes any batch it is in throw; job 1 fails on its own once.
        if (items.length > 1 && items.some((x) => x.data.i === 0)) throw new Error('poisoned batch');
        return items.map(({ data }) => {
          if (data.i === 0) return new PermanentJobError('bad job');
          if (data.i === 1 && !failedOnce) {
            failedOnce = true;
            return new Error('once');
          }
          return undefined;
        });
      },
      { batchSize: 4, concurrency: 1 },
    );
    const ids = await env.storage.db.transaction().execute(async (trx) => {
      const out: string[] = [];
      for (let i = 0; i < 4; i++) out.push(await q.enqueue(trx, 't.batch.fail', { i }));
      return out;
    });
    await q.start();
    await waitFor(async () => (await env.job(ids[0]))?.state === 'failed', 10_000, 'poison job failed');
    for (const id of ids.slice(1)) await waitFor(async () => (await env.job(id))?.state === 'done', 10_000, `job ${id} done`);
    expect(calls[0].length).toBe(4);
    // After the batch threw, each job ran alone.
    expect(calls.slice(1, 5).map((c) => c.length)).toEqual([1, 1, 1, 1]);
    expect(runs.get(1)).toBe(3);
    expect(runs.get(2)).toBe(2);
  });

  it('on stop waits for running handlers, then releases unfinished jobs to another worker at once', async () => {
    // The grace period ends when the test says: a handler that outlives it needs no race.
    const graceAsked: number[] = [];
    const graceOver = deferred();
    const a = env.queue({
      graceMs: 150,
      lockMs: 60_000,
      graceTimer: async (ms) => {
        graceAsked.push(ms);
        await graceOver.promise;
      },
    });
    const quickDone = deferred();
    const quickGo = deferred();
    const stuckStarted = deferred();
    const never = deferred();
    let quickFinished = false;
    a.work('t.quick', async () => {
      quickDone.resolve();
      await quickGo.promise;
      quickFinished = true;
    });
    a.work('t.stuck', async () => {
      stuckStarted.resolve();
      await never.promise;
    });
    await a.start();
    const quick = await a.enqueue(env.storage.db, 't.quick', {});
    const stuck = await a.enqueue(env.storage.db, 't.stuck', {});
    await Promise.all([quickDone.promise, stuckStarted.promise]);

    let stopped = false;
    const stopping = a.stop().then(() => {
      stopped = true;
    });
    await waitFor(async () => graceAsked.length > 0, 10_000, 'stop waiting out its grace period');
    expect(graceAsked).toEqual([150]);
    // A handler that ends within the grace period completes its job.
    quickGo.resolve();
    await waitFor(async () => (await env.job(quick))?.state === 'done', 10_000, 'the quick job done while stop waits');
    expect(stopped).toBe(false);
    graceOver.resolve();
    await stopping;
    expect(quickFinished).toBe(true);
    expect((await env.job(quick))?.state).toBe('done');
    // Released without spending the interrupted attempt, although the lock had a minute to go.
    expect(await env.job(stuck)).toMatchObject({ state: 'waiting', attempt: 0 });

    const other = env.storage.reopen();
    const b = env.queue({}, other);
    const taken = deferred<number>();
    b.work('t.stuck', async (_d, job) => taken.resolve(job.attempt));
    await b.start();
    expect(await taken.promise).toBe(1);
    await waitFor(async () => (await env.job(stuck))?.state === 'done');
    // The first handler finishing late changes nothing: its claim is no longer the job's.
    const writes: Promise<unknown>[] = [];
    const backend = a as unknown as JobBackend;
    for (const method of ['complete', 'completeMany', 'retry', 'fail', 'release'] as const) {
      const write = backend[method]?.bind(backend) as ((...args: unknown[]) => Promise<void>) | undefined;
      if (write) (backend as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        const p = write(...args);
        writes.push(p);
        return p;
      };
    }
    never.resolve();
    // The runner reacts to the handler's end within the same turn; any write it makes is awaited.
    await new Promise((r) => setImmediate(r));
    await Promise.allSettled(writes);
    expect((await env.job(stuck))?.state).toBe('done');
  });

  it('starts again after stop (a worker restart on the same queue)', async () => {
    const q = env.queue();
    const claims = watchClaims(q);
    const first = deferred();
    let firstRuns = 0;
    q.work('t.restart', async () => {
      firstRuns++;
      first.resolve();
    });
    await q.start();
    await q.enqueue(env.storage.db, 't.restart', {});
    await first.promise;
    await q.stop();
    const claimsAtStop = claims.begun();

    const later = await q.enqueue(env.storage.db, 't.restart', { n: 2 });
    expect((await env.job(later))?.state).toBe('waiting');
    const second = deferred<unknown>();
    q.work('t.restart', async (data) => second.resolve(data));
    // Stopped, the worker claimed nothing (had it, the old handler would have run the job).
    expect(claims.begun()).toBe(claimsAtStop);
    await q.start();
    expect(await second.promise).toEqual({ n: 2 });
    expect(firstRuns).toBe(1);
    expect(claims.claimed.filter((c) => c === later)).toHaveLength(1);
    await waitFor(async () => (await env.job(later))?.state === 'done');
  });
});

describe('sqlite queue', () => {
  let env: QueueEnv;
  beforeEach(async () => {
    env = await queueEnv('sqlite');
  });
  afterEach(async () => {
    await env.cleanup();
  });

  describe('completing a batch', () => {
    it('completes in one statement only the runs this worker still holds', async () => {
      const q = env.queue();
      for (let i = 0; i < 3; i++) await q.enqueue(env.storage.db, 't.fence', { i });
      const backend = q as unknown as JobBackend;
      const [first, second, third] = await backend.claim('t.fence', 3);
      if (!first || !second || !third) throw new Error('expected three claimed jobs');
      // The second job was released and claimed again, here too: a new run, not the one completed.
      await env.storage.db.executeQuery(CompiledQuery.raw('update queue_jobs set attempt = 2 where id = ?', [second.id]));
      await backend.completeMany?.([first, second, third]);
      expect((await env.job(first.id))?.state).toBe('done');
      expect(await env.job(second.id)).toMatchObject({ state: 'running', attempt: 2 });
      expect((await env.job(third.id))?.state).toBe('done');
    });
  });

  describe('looking for due jobs', () => {
    it('names only those with a due waiting job or a running job whose lock expired', async () => {
      const t0 = new Date('2026-01-15T10:00:00.000Z').getTime();
      const clock = new ManualClock(new Date(t0));
      const q = env.queue({ clock, lockMs: 30_000 });
      const backend = q as unknown as JobBackend;
      await q.enqueue(env.storage.db, 't.due', {});
      await q.enqueue(env.storage.db, 't.later', {}, { runAt: new Date(t0 + 60_000) });
      await q.enqueue(env.storage.db, 't.locked', {});
      await q.enqueue(env.storage.db, 't.expired', {});
      await q.enqueue(env.storage.db, 't.done', {});
      expect(await backend.claim('t.locked', 1)).toHaveLength(1);
      const [done] = await backend.claim('t.done', 1);
      await backend.complete(done);
      clock.advance(10_000);
      // t.expired's lock runs out at t0 + 40 s, t.locked's is renewed below.
      expect(await backend.claim('t.expired', 1)).toHaveLength(1);
      const names = ['t.due', 't.later', 't.locked', 't.expired', 't.done', 't.none'];
      expect([...(await backend.dueNames!(names))].sort()).toEqual(['t.due']);
      clock.advance(30_001);
      await env.storage.db.executeQuery(CompiledQuery.raw(`update queue_jobs set locked_until = ? where name = 't.locked'`, [new Date(t0 + 100_000).toISOString()]));
      expect([...(await backend.dueNames!(names))].sort()).toEqual(['t.due', 't.expired']);
      clock.advance(20_000);
      expect([...(await backend.dueNames!(names))].sort()).toEqual(['t.due', 't.expired', 't.later']);
      expect(await backend.dueNames!([])).toEqual(new Set());
    });

    it('an idle worker polls every name without claiming, and claims as soon as one has a job', async () => {
      const q = env.queue();
      const backend = q as unknown as JobBackend;
      const claimedNames: string[] = [];
      const claim = backend.claim.bind(backend);
      backend.claim = (name, limit) => {
        claimedNames.push(name);
        return claim(name, limit);
      };
      const claims = watchClaims(q);
      const ran = deferred<unknown>();
      for (const name of ['t.a', 't.b', 't.c']) q.work(name, async (data) => ran.resolve(data));
      await q.start();
      await claims.polls('t.c', 3);
      expect(claimedNames).toEqual([]);
      // Enqueued on another connection: no nudge reaches this worker, its next poll finds the job.
      const other = new SqliteQueue(env.storage.db);
      await other.enqueue(env.storage.db, 't.b', { from: 'elsewhere' });
      expect(await ran.promise).toEqual({ from: 'elsewhere' });
      expect(claimedNames).toContain('t.b');
      expect(claimedNames).not.toContain('t.a');
    });
  });

  describe('purge', () => {
    it('deletes finished jobs past their retention and keeps the rest', async () => {
      const t0 = new Date('2026-01-15T10:00:00.000Z').getTime();
      const q = env.queue({ clock: new ManualClock(new Date(t0)) });
      const ran = deferred();
      q.work('t.p', async () => ran.resolve());
      q.work('t.f', async () => {
        throw new PermanentJobError('no');
      });
      await q.start();
      const done = await q.enqueue(env.storage.db, 't.p', {});
      const failed = await q.enqueue(env.storage.db, 't.f', {});
      const waiting = await q.enqueue(env.storage.db, 't.p', {}, { runAt: new Date(t0 + 86_400_000) });
      await ran.promise;
      await waitFor(async () => (await env.job(done))?.state === 'done' && (await env.job(failed))?.state === 'failed');

      const twoHoursOn = new SqliteQueue(env.storage.db, { clock: new ManualClock(new Date(t0 + 2 * 3_600_000)) });
      expect(await twoHoursOn.purge()).toBe(1);
      expect(await env.job(done)).toBeUndefined();
      expect((await env.job(failed))?.state).toBe('failed');
      expect((await env.job(waiting))?.state).toBe('waiting');

      const weeksOn = new SqliteQueue(env.storage.db, { clock: new ManualClock(new Date(t0 + 8 * 86_400_000)) });
      expect(await weeksOn.purge()).toBe(1);
      expect(await env.job(failed)).toBeUndefined();
      expect((await env.job(waiting))?.state).toBe('waiting');
    });
  });
});

describe.each(STORAGE_KINDS.filter((k) => k === 'postgres'))('pg-boss lock heartbeat on %s', (kind) => {
  let env: QueueEnv;
  let other: pg.Client | undefined;
  beforeEach(async () => {
    env = await queueEnv(kind);
  });
  afterEach(async () => {
    await other?.end().catch(() => undefined);
    other = undefined;
    await env.cleanup();
  });

  it('a heartbeat chosen as a deadlock victim (40P01) is retried, not reported', async () => {
    // Explicit interleaving, as pg-boss maintenance or another worker's transaction can cause it:
    // the heartbeat holds job 1 and waits for job 2, which the other transaction holds while it
    // asks for job 1.
    const q = env.queue({ lockMs: 60_000 }) as unknown as PgBossQueue;
    await q.prepare(['t.hb']);
    await q.enqueue(env.storage.db, 't.hb', { n: 1 });
    await q.enqueue(env.storage.db, 't.hb', { n: 2 });
    const jobs = await q.claim('t.hb', 2);
    expect(jobs).toHaveLength(2);
    const [first, second] = [...jobs].sort((a, b) => (a.id < b.id ? -1 : 1)) as [(typeof jobs)[0], (typeof jobs)[0]];
    const uuid = (id: string) => id.slice(-36);
    const table = `${env.bossSchema}.job`;

    other = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await other.connect();
    // The heartbeat's session (1 s default) detects the cycle first and is the one aborted.
    await other.query(`set deadlock_timeout = '60s'`);
    await other.query('begin');
    await other.query(`update ${table} set priority = priority where id = $1`, [uuid(second.id)]);

    const beat = q.heartbeat([second, first]).then(
      () => 'ok',
      (err: Error & { code?: string }) => err.code ?? String(err),
    );
    // Watched from another connection: inside a transaction pg_stat_activity is a frozen snapshot.
    const waiting = () =>
      env.storage.db.executeQuery(
        CompiledQuery.raw(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%' || $1 || '%' and query like '%expire_in%'`, [table]),
      );
    await waitFor(async () => (await waiting()).rows.length > 0, 10_000, 'the heartbeat waiting for job 2');
    await other.query(`update ${table} set priority = priority where id = $1`, [uuid(first.id)]);
    await other.query('commit');

    expect(await beat).toBe('ok');
    const { rows } = await other.query<{ secs: number }>(`select extract(epoch from (started_on + expire_in - now()))::float8 as secs from ${table} where name = 't.hb'`);
    for (const row of rows) expect(row.secs).toBeGreaterThan(50);
  });

  it('does not renew a claim that is no longer the job\'s: a stale worker beating another worker\'s job', async () => {
    const q = env.queue({ lockMs: 60_000 }) as unknown as PgBossQueue;
    await q.prepare(['t.hb']);
    await q.enqueue(env.storage.db, 't.hb', { n: 1 });
    const [job] = await q.claim('t.hb', 1);
    const table = `${env.bossSchema}.job`;
    other = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await other.connect();
    // Another worker's claim: a later started_on, a short lock.
    await other.query(`update ${table} set started_on = started_on + interval '1 second', expire_in = interval '5 seconds' where id = $1`, [job.id.slice(-36)]);
    await q.heartbeat([job]);
    const { rows } = await other.query<{ secs: number }>(`select extract(epoch from expire_in)::float8 as secs from ${table} where id = $1`, [job.id.slice(-36)]);
    expect(rows[0].secs).toBe(5);
  });
});

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type JobContext, PermanentJobError } from '../../src/queue/index.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type QueueEnv, queueEnv, waitFor } from './helpers.js';

describe.each(STORAGE_KINDS)('onFailed: a job that fails for good (%s)', (kind) => {
  let env: QueueEnv;
  beforeEach(async () => {
    env = await queueEnv(kind);
  });
  afterEach(async () => {
    await env.cleanup();
  });

  it('is called once with the data and error on a PermanentJobError, and on the last attempt only', async () => {
    const q = env.queue({ backoff: { baseMs: 5 } });
    const failed: { data: unknown; job: JobContext; error: string }[] = [];
    const onFailed = async (data: unknown, job: JobContext, error: string) => {
      failed.push({ data, job, error });
    };
    q.work('t.permanent', async () => {
      throw new PermanentJobError('bad input');
    }, { onFailed });
    q.work('t.flaky', async () => {
      throw new Error('still down');
    }, { onFailed });
    await q.start();
    const permanent = await q.enqueue(env.storage.db, 't.permanent', { n: 1 }, { maxAttempts: 5 });
    const flaky = await q.enqueue(env.storage.db, 't.flaky', { n: 2 }, { maxAttempts: 3 });
    for (const id of [permanent, flaky]) await waitFor(async () => (await env.job(id))?.state === 'failed', 10_000, `job ${id} failed`);
    const byName = (name: string) => failed.filter((f) => f.job.name === name);
    expect(byName('t.permanent')).toHaveLength(1);
    expect(byName('t.permanent')[0].data).toEqual({ n: 1 });
    expect(byName('t.permanent')[0].error).toContain('bad input');
    // Retries do not call it; the third (last) failure does.
    expect(byName('t.flaky')).toHaveLength(1);
    expect(byName('t.flaky')[0].job.attempt).toBe(3);
    expect(byName('t.flaky')[0].error).toContain('still down');
  });
});

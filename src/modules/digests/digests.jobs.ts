import type { Deps } from '../../deps.js';
import type { DigestsService } from './digests.service.js';

export const DIGEST_SWEEP_JOB = 'digests.sweep';

/**
 * The periodic sending of due digests. Every worker process schedules it every minute (and once
 * at start, so digests that fell due while no worker ran go out at once); the job's key is the
 * minute, so across processes it runs once a minute. A run sends every digest due by then
 * (DigestsService.sendDue); two runs at once cannot send one digest twice (its claim is a
 * conditional update).
 */
export function registerDigestJobs(deps: Pick<Deps, 'queue' | 'db' | 'clock'>, digests: DigestsService): { scheduleSweep: () => Promise<string> } {
  deps.queue.work(DIGEST_SWEEP_JOB, async () => {
    await digests.sendDue();
  }, { concurrency: 1 });
  return {
    scheduleSweep: () => deps.queue.enqueue(deps.db, DIGEST_SWEEP_JOB, {}, { key: deps.clock.now().toISOString().slice(0, 16), maxAttempts: 3 }),
  };
}

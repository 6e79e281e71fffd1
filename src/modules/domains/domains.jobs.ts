import type { Deps } from '../../deps.js';
import type { DomainsService } from './domains.service.js';

export const DOMAIN_CHECK_JOB = 'domains.check';

/**
 * The periodic verification of sender domains. Every worker process schedules it every hour; the
 * job's key is the hour, so across processes it runs once an hour (the queue keeps one job per
 * key), and each run checks the domains whose next check is due (hourly while pending, daily once
 * verified or failed).
 */
export function registerDomainJobs(deps: Pick<Deps, 'queue' | 'db' | 'clock'>, domains: DomainsService): { scheduleChecks: () => Promise<string> } {
  deps.queue.work(DOMAIN_CHECK_JOB, async () => {
    await domains.checkDue();
  }, { concurrency: 1 });
  return {
    scheduleChecks: () => deps.queue.enqueue(deps.db, DOMAIN_CHECK_JOB, {}, { key: deps.clock.now().toISOString().slice(0, 13), maxAttempts: 3 }),
  };
}

import type { Deps } from '../../deps.js';
import { LOG_QUERY_JOB, type LogsService } from './logs.service.js';

/** The log module's jobs: a log query runs in the background; one that fails for good ends Failed. */
export function registerLogJobs(deps: Pick<Deps, 'queue'>, logs: LogsService): void {
  deps.queue.work<{ queryId: string }>(LOG_QUERY_JOB, (data, job) => logs.runQuery(data.queryId, job), {
    concurrency: 2,
    onFailed: (data) => logs.failQuery((data as { queryId: string }).queryId),
  });
}

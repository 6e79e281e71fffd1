import type { Deps } from '../../deps.js';
import { LOG_QUERY_JOB, LogsService } from './logs.service.js';

/** The log module's jobs: a log query runs in the background; one that fails for good ends Failed. */
export function registerLogJobs(deps: Deps): void {
  const logs = new LogsService(deps, deps.queue);
  deps.queue.work<{ queryId: string }>(LOG_QUERY_JOB, (data) => logs.runQuery(data.queryId), {
    concurrency: 2,
    onFailed: (data) => logs.failQuery((data as { queryId: string }).queryId),
  });
}

import type { Deps } from './deps.js';
import { LOG_QUERY_JOB, LogsService } from './modules/logs/logs.service.js';
import { LogsRepository } from './modules/logs/logs.repository.js';
import { DeliveryWorker } from './modules/sending/delivery.worker.js';
import { type Executors, buildExecutors } from './modules/sending/executors/index.js';
import { IdempotencyRepository } from './modules/sending/idempotency.repository.js';
import { MessagesRepository } from './modules/sending/messages.repository.js';

export interface Workers {
  /** Channels this process can deliver. */
  executors: Executors;
  worker: DeliveryWorker;
  /** Purges old logs, idempotency keys and log queries once. */
  purge(): Promise<void>;
  stop(): Promise<void>;
}

const DAY_MS = 24 * 3600 * 1000;
const PURGE_INTERVAL_MS = 3600 * 1000;

/** Registers every job handler on the queue and starts working; the API process may run it too (role all). */
export async function startWorkers(deps: Deps, options: { concurrency?: number; retryBaseMs?: number } = {}): Promise<Workers> {
  const { executors, close: closeExecutors } = buildExecutors(deps);
  const worker = new DeliveryWorker(deps, deps.queue, executors, options.retryBaseMs);
  worker.register(options);
  const logs = new LogsService(deps, deps.queue);
  deps.queue.work<{ queryId: string }>(LOG_QUERY_JOB, (data) => logs.runQuery(data.queryId), {
    concurrency: 2,
    onFailed: (data) => logs.failQuery((data as { queryId: string }).queryId),
  });
  await deps.queue.start();

  const purge = async () => {
    const now = deps.clock.now().getTime();
    const messages = new MessagesRepository(deps.db);
    const before = new Date(now - deps.config.logRetentionDays * DAY_MS).toISOString();
    while ((await messages.purgeBefore(before)) > 0) {
      // delete in batches so one purge never holds a long transaction
    }
    await new IdempotencyRepository(deps.db).purgeBefore(new Date(now - DAY_MS).toISOString());
    await new LogsRepository(deps.db).purgeQueriesBefore(new Date(now - DAY_MS).toISOString());
  };
  const timer = setInterval(() => purge().catch((err) => deps.logger.warn({ err }, 'log retention purge failed')), PURGE_INTERVAL_MS);
  timer.unref();

  let stopped: Promise<void> | null = null;
  return {
    executors,
    worker,
    purge,
    // Idempotent: a second stop waits for the first instead of closing connections twice.
    stop() {
      stopped ??= stopAll();
      return stopped;
    },
  };

  async function stopAll(): Promise<void> {
    clearInterval(timer);
    await deps.queue.stop();
    await worker.close();
    await closeExecutors();
  }
}

import type { Deps } from '../../deps.js';
import type { RenderPool } from '../../rendering/render-pool.js';
import { DeliveryWorker, type DeliveryWorkerServices } from './delivery.worker.js';
import type { DeliveryTiming } from './delivery-runs.js';
import type { Executors } from './executors/index.js';

/** The sending module's jobs: message processing, journal ingestion and deliveries (DeliveryWorker). */
export function registerSendingJobs(
  deps: Deps,
  services: DeliveryWorkerServices,
  executors: Executors,
  renders: RenderPool,
  options: { concurrency?: number } & Partial<DeliveryTiming> = {},
): DeliveryWorker {
  const worker = new DeliveryWorker(deps, deps.queue, executors, services, { retryBaseMs: options.retryBaseMs, firstAttemptBudgetMs: options.firstAttemptBudgetMs }, renders);
  worker.register(options);
  return worker;
}

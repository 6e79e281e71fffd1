import type { Deps } from '../../deps.js';
import { DeliveryWorker } from './delivery.worker.js';
import type { Executors } from './executors/index.js';

/** The sending module's jobs: message processing, journal ingestion and deliveries (DeliveryWorker). */
export function registerSendingJobs(deps: Deps, executors: Executors, options: { concurrency?: number; retryBaseMs?: number } = {}): DeliveryWorker {
  const worker = new DeliveryWorker(deps, deps.queue, executors, options.retryBaseMs);
  worker.register(options);
  return worker;
}

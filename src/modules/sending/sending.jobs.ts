import type { Deps } from '../../deps.js';
import { DeliveryWorker, type DeliveryWorkerServices } from './delivery.worker.js';
import type { Executors } from './executors/index.js';

/** The sending module's jobs: message processing, journal ingestion and deliveries (DeliveryWorker). */
export function registerSendingJobs(
  deps: Deps,
  services: DeliveryWorkerServices,
  executors: Executors,
  options: { concurrency?: number; retryBaseMs?: number } = {},
): DeliveryWorker {
  const worker = new DeliveryWorker(deps, deps.queue, executors, services, options.retryBaseMs);
  worker.register(options);
  return worker;
}

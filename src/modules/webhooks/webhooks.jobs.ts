import type { WebhooksService } from './webhooks.service.js';

/**
 * The webhooks module's background work: its WebhookWorker (dispatch of ledger events and
 * delivery with retries) runs where the process runs workers. It keeps its queue in
 * webhook_deliveries rather than on the Queue port (see WebhookWorker for the measured reason).
 */
export function startWebhookJobs(service: WebhooksService): { stop(): Promise<void> } {
  service.worker.start();
  return {
    async stop() {
      await service.worker.stop();
      await service.sender.close();
    },
  };
}

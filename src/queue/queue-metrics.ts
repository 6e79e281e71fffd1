import { Gauge, type Registry } from 'prom-client';
import type { Queue } from './port.js';

/**
 * Queue gauges of `registry`, read from the queue's tables when /metrics is scraped (one cheap
 * statement per job name and gauge, see Queue.depths), so they cover the jobs of every process sharing the
 * database. A name seen once stays in the output (at 0 once drained), so its series does not vanish.
 */
export function registerQueueMetrics(registry: Registry, queue: Pick<Queue, 'depths'>): void {
  const seen = new Set<string>();
  // Each gauge reads for itself: prom-client collects metrics concurrently, and a read shared
  // between them would need to know when both had it. Two index range scans per scrape.
  const depths = () => queue.depths();
  new Gauge({
    name: 'clarion_queue_jobs',
    help: 'Jobs waiting in the queue by job name: state due (their time has come, not claimed yet) or delayed (scheduled, or backing off before a retry)',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      // The database unreachable: the last values stay, and the rest of /metrics still answers.
      const rows = await depths().catch(() => null);
      if (!rows) return;
      this.reset();
      for (const name of seen) for (const state of ['due', 'delayed']) this.set({ queue: name, state }, 0);
      for (const { name, due, delayed } of rows) {
        seen.add(name);
        this.set({ queue: name, state: 'due' }, due);
        this.set({ queue: name, state: 'delayed' }, delayed);
      }
    },
  });
  new Gauge({
    name: 'clarion_queue_oldest_due_seconds',
    help: 'How long the longest-waiting due job of each job name has been due (0 when none is due): the delay the workers are behind by',
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      const rows = await depths().catch(() => null);
      if (!rows) return;
      this.reset();
      for (const name of seen) this.set({ queue: name }, 0);
      for (const { name, oldestDueSeconds } of rows) {
        seen.add(name);
        this.set({ queue: name }, oldestDueSeconds);
      }
    },
  });
}

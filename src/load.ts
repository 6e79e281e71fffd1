import { performance } from 'node:perf_hooks';

/** Requests per window above which the API counts as busy (100 per 100 ms: 1,000 requests/s). */
const WINDOW_MS = 100;
const BUSY_REQUESTS_PER_WINDOW = 100;

/**
 * How hard this process's HTTP API is being driven, so workers in the same process (role "all",
 * the embedded default) can give way to it. On SQLite every statement runs on the one event
 * loop, so a worker at full concurrency takes the time requests are answered in. While the API
 * is busy the queue spaces its job starts so that runs take about a tenth of the time
 * (BusyGate): deliveries keep moving, from a backlog that is already durable, and take full
 * concurrency back once the load drops.
 */
export class ApiLoad {
  private windowStart = -Infinity;
  private count = 0;
  private previous = 0;

  /** Called for every request received. */
  requestReceived(now = performance.now()): void {
    if (now - this.windowStart >= WINDOW_MS) {
      this.previous = now - this.windowStart < 2 * WINDOW_MS ? this.count : 0;
      this.windowStart = now;
      this.count = 0;
    }
    this.count++;
  }

  busy(now = performance.now()): boolean {
    if (now - this.windowStart >= 2 * WINDOW_MS) return false;
    return Math.max(this.previous, this.count) >= BUSY_REQUESTS_PER_WINDOW;
  }
}

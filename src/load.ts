import { performance } from 'node:perf_hooks';

/**
 * Requests per window from which the API counts as busy (10 per 100 ms: 100 requests/s), if the
 * event loop is saturated too. Low on purpose: workers running at full concurrency hold the loop
 * so long that a hard-driven API gets only a few requests through per window (measured: 4 to
 * 125 per 100 ms against a backlog), and a higher bar would never see it.
 */
const WINDOW_MS = 100;
const BUSY_REQUESTS_PER_WINDOW = 10;
/** Event-loop utilization from which the process counts as saturated. */
const SATURATED = 0.9;
/**
 * Windows in a row under SATURATED before a saturated process counts as having time to spare.
 * One is not enough: under a steady hard load the utilization dips just under 0.9 every second
 * or so, and each dip let the workers run at full concurrency for a whole window, taking ~90%
 * of it (measured: 50-140 requests answered in such a window against ~1,000 in the others, and
 * the embedded default at 0.8 of the API process alone).
 */
const CALM_WINDOWS = 3;

/** Utilization (0 to 1) since the previous call: of the event loop, or of what requests wait on. */
export type UtilizationMeter = () => number;

export function eventLoopMeter(): UtilizationMeter {
  let mark = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, mark);
    mark = now;
    return utilization;
  };
}

/**
 * The share of the time something was at work, for a UtilizationMeter: `begin()` and `end()`
 * around each piece of work (pieces may overlap; time counts once while any is under way).
 */
export class WorkTime {
  private active = 0;
  private since = performance.now();
  private busyMs = 0;
  private activeSince = 0;

  constructor(private readonly now: () => number = () => performance.now()) {
    this.since = now();
  }

  begin(): void {
    if (this.active++ === 0) this.activeSince = this.now();
  }

  end(): void {
    if (--this.active === 0) this.busyMs += this.now() - this.activeSince;
  }

  /** Share of the time at work since the previous call. */
  readonly meter: UtilizationMeter = () => {
    const now = this.now();
    let busy = this.busyMs;
    if (this.active > 0) {
      busy += now - this.activeSince;
      this.activeSince = now;
    }
    const elapsed = now - this.since;
    this.since = now;
    this.busyMs = 0;
    return elapsed > 0 ? Math.min(1, busy / elapsed) : 0;
  };
}

/**
 * How hard this process's HTTP API is being driven, so workers in the same process (role "all",
 * the embedded default) can give way to it. On SQLite every statement runs on the one event
 * loop, so a worker at full concurrency takes the time requests are answered in. While the API
 * is busy the queue spaces its job starts so that runs take a small share of the time
 * (BusyGate, CLARION_BUSY_WORKER_PERCENT): deliveries keep moving, from a backlog that is already durable, and take full
 * concurrency back once the load drops.
 *
 * Busy needs both requests and a saturated process (utilization over the last window, and it
 * stays saturated until CALM_WINDOWS windows in a row have time to spare): at a rate the
 * process handles with time to spare, workers keep full concurrency, or the backlog would grow
 * while the CPU idles. Saturated means the event loop, or what the requests wait on when it is
 * not the event loop (measureBackend): on PostgreSQL the API waits on its database, and its
 * loop never saturates however hard it is driven (measured, issue 11: workers at full
 * concurrency through the whole load, one process at 37% of the raw route against 53% for the
 * API alone).
 */
export class ApiLoad {
  private windowStart = -Infinity;
  private count = 0;
  private previous = 0;
  private saturated = false;
  private calmWindows = 0;
  private backend: UtilizationMeter | null = null;

  constructor(private readonly meter: UtilizationMeter = eventLoopMeter()) {}

  /**
   * A second measure of saturation: the share of the time the storage the requests wait on is at
   * work (the send intake's group commits on PostgreSQL).
   */
  measureBackend(meter: UtilizationMeter): void {
    this.backend = meter;
  }

  /** Called for every request received. */
  requestReceived(now = performance.now()): void {
    if (now - this.windowStart >= WINDOW_MS) {
      this.previous = now - this.windowStart < 2 * WINDOW_MS ? this.count : 0;
      this.windowStart = now;
      this.count = 0;
      const loop = this.meter();
      const backend = this.backend ? this.backend() : 0;
      if (loop >= SATURATED || backend >= SATURATED) {
        this.saturated = true;
        this.calmWindows = 0;
      } else if (++this.calmWindows >= CALM_WINDOWS) this.saturated = false;
    }
    this.count++;
  }

  busy(now = performance.now()): boolean {
    if (now - this.windowStart >= 2 * WINDOW_MS) return false;
    return this.saturated && Math.max(this.previous, this.count) >= BUSY_REQUESTS_PER_WINDOW;
  }
}

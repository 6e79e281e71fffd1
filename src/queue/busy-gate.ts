import { performance } from 'node:perf_hooks';

/**
 * The longest wait between two starts while busy, so jobs waiting on a provider (whose duration
 * overstates their cost) still start twice a second. Not lower: a batch of 16 SQLite-bound
 * messages costs about 10 ms, and a 100 ms cap held the workers near 9% whatever the share
 * (measured: acceptance went up 1 to 8 points in paired runs with 500 ms).
 */
const MAX_GAP_MS = 500;
/** At least one timer turn between two starts while busy, so pending requests are read in between. */
const MIN_GAP_MS = 1;

/**
 * Spaces job starts while the API in the same process is busy (see ApiLoad), so that runs take
 * about `share` of the time and requests the rest. Each start waits `cost * (1 - share) / share`
 * after the previous one, where `cost` follows how long recent busy runs took (an exponential
 * average of their durations). On SQLite a run's queries are synchronous, so its duration is the
 * time it holds the event loop; a run waiting on a provider looks costlier than it is, and the
 * wait is capped at MAX_GAP_MS so those keep moving.
 *
 * Measured reason (issue 3): "one start per event-loop turn" let the embedded default's workers
 * take about 40% of the CPU of a saturated API and halved the sends it accepted.
 */
export class BusyGate {
  private nextStart = 0;
  private costMs = MIN_GAP_MS;
  private readonly held = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly busy: () => boolean,
    private readonly share: number,
    /** Called with the names that waited, once the next start is allowed. */
    private readonly reopen: (names: string[]) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Runs that may start now for `name`: any number when not busy, else one, or none (the name waits its turn). */
  room(name: string): number {
    if (!this.busy()) return Number.POSITIVE_INFINITY;
    const now = this.now();
    if (now >= this.nextStart) return 1;
    this.held.add(name);
    this.timer ??= setTimeout(() => {
      this.timer = null;
      const names = [...this.held];
      this.held.clear();
      this.reopen(names);
    }, Math.ceil(this.nextStart - now));
    return 0;
  }

  /** A run started while busy; call the returned function when it ends. */
  started(): () => void {
    const begun = this.now();
    const gap = (this.costMs * (1 - this.share)) / this.share;
    this.nextStart = begun + Math.min(MAX_GAP_MS, Math.max(MIN_GAP_MS, gap));
    return () => {
      this.costMs = 0.7 * this.costMs + 0.3 * (this.now() - begun);
    };
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.held.clear();
  }
}

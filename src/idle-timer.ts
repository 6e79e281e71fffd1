/**
 * Calls `onIdle` once `idleMs` have passed since the last idle() with no busy() since: how a
 * thread started on demand (the MIME thread, the render threads) is let go after its work ends,
 * so that a server at rest gives back the thread's heap. The timer never holds the process open.
 * `idleMs` Infinity: never.
 */
export class IdleTimer {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly idleMs: number,
    private readonly onIdle: () => void,
  ) {}

  /** Work ended with nothing left: the count starts (again). */
  idle(): void {
    this.busy();
    if (!Number.isFinite(this.idleMs)) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.onIdle();
    }, this.idleMs);
    this.timer.unref();
  }

  /** Whether the count runs (idle() was called and neither busy() nor the end came since). */
  get counting(): boolean {
    return this.timer !== null;
  }

  /** Work began: no count until the next idle(). */
  busy(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

/**
 * How long a thread started on demand stays without work before it exits. Long enough that a
 * broadcast or a burst of sends never waits for a thread to start between its batches (measured
 * on the slower 2-CPU host: the MIME thread ready in 67-88 ms, a render thread's first render in
 * 86-114 ms, about 100 ms of CPU each; mails meanwhile are built on the main thread), short
 * enough that a server at rest holds no such thread.
 */
export const THREAD_IDLE_MS = 60_000;

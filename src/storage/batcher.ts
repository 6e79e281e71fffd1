/** One unit's result within a batch: its value, or the error that failed it alone. */
export type Settled<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Pending<U, R> {
  unit: U;
  resolve: (value: R) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: units submitted while a batch is being written form the next batch. A unit's
 * promise settles only once `write` has resolved for its batch (after the commit), so an answer
 * given on it is durable; a `write` that throws fails every unit of its batch. Before each
 * batch it yields to pending I/O, so requests already readable join it and a synchronous batch
 * (better-sqlite3) does not hold the event loop for long; an idle submit waits one turn at most.
 * With `overlap`, a second batch may be written while one is, once enough units wait for it
 * (a database whose round trips are the batch's latency: PostgreSQL).
 */
export class Batcher<U, R> {
  private pending: Pending<U, R>[] = [];
  private inFlight = 0;
  /** Writers under way (each drains batches until none is left for it). */
  private writers = 0;

  /**
   * `overlap`: a second batch may be written while one is (up to `writers` at once), once at
   * least `minUnits` units wait for it; fewer wait for the batch being written to end.
   */
  constructor(
    private readonly write: (units: U[]) => Promise<Settled<R>[]>,
    private readonly maxBatch: number,
    private readonly overlap: { writers: number; minUnits: number } = { writers: 1, minUnits: Number.POSITIVE_INFINITY },
  ) {}

  /** Units waiting or in the batch being written. */
  get load(): number {
    return this.pending.length + this.inFlight;
  }

  /** Whether a unit submitted now joins a batch about to be written (not one waiting behind a write). */
  get gathering(): boolean {
    return this.inFlight === 0 && this.pending.length > 0 && this.pending.length < this.maxBatch;
  }

  submit(unit: U): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ unit, resolve, reject });
      if (this.writers === 0 || (this.writers < this.overlap.writers && this.pending.length >= this.overlap.minUnits)) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.writers++;
    try {
      while (this.pending.length > 0) {
        await new Promise((resolve) => setImmediate(resolve));
        // Another writer is under way: this one goes on only with enough units for a batch of its own.
        if (this.writers > 1 && this.pending.length < this.overlap.minUnits) break;
        const batch = this.pending.splice(0, this.maxBatch);
        if (batch.length === 0) break;
        this.inFlight += batch.length;
        let settled: Settled<R>[];
        try {
          settled = await this.write(batch.map((p) => p.unit));
        } catch (error) {
          this.inFlight -= batch.length;
          for (const item of batch) item.reject(error);
          continue;
        }
        this.inFlight -= batch.length;
        batch.forEach((item, i) => {
          const result = settled[i];
          if (result.ok) item.resolve(result.value);
          else item.reject(result.error);
        });
      }
    } finally {
      this.writers--;
      // Units that arrived while this writer was leaving, with no other to take them.
      if (this.writers === 0 && this.pending.length > 0) void this.drain();
    }
  }
}

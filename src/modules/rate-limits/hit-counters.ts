import { LruMap } from 'toad-cache';
import type { Clock } from '../../clock.js';
import { Batcher, type Settled } from '../../storage/batcher.js';
import type { Storage } from '../../storage/db.js';
import { type BucketHits, RateLimitsRepository } from './rate-limits.repository.js';

/** A bucket's count after a hit, and how long until its window ends. */
export interface BucketWindow {
  count: number;
  ttlMs: number;
}

/**
 * Fixed-window request counters: a bucket's window opens at its first hit and lasts `windowMs`;
 * the first hit after it ended opens the next. Time is the injected clock's, so a test moves a
 * window's end by hand. The same rules on both engines: in memory (one process, SQLite) and in
 * the database (every process on one PostgreSQL database shares the counts).
 */
export interface HitCounter {
  hit(bucket: string, windowMs: number): BucketWindow | Promise<BucketWindow>;
}

/** Buckets held in memory: an address flood evicts the least recently seen, never grows the heap. */
const MEMORY_BUCKETS = 100_000;

/** This process's counters, in an LRU map (toad-cache, the rate-limit plugin's own). */
export class MemoryHitCounter implements HitCounter {
  private readonly windows: LruMap<{ count: number; endsAt: number }>;

  constructor(
    private readonly clock: Clock,
    capacity = MEMORY_BUCKETS,
  ) {
    this.windows = new LruMap(capacity);
  }

  hit(bucket: string, windowMs: number): BucketWindow {
    const now = this.clock.now().getTime();
    let window = this.windows.get(bucket);
    if (window === undefined || window.endsAt <= now) {
      window = { count: 0, endsAt: now + windowMs };
      this.windows.set(bucket, window);
    }
    window.count++;
    return { count: window.count, ttlMs: window.endsAt - now };
  }
}

interface Hit {
  bucket: string;
  windowMs: number;
}

/** Hits written in one statement at most. */
const MAX_BATCH = 500;

/**
 * Counters in the database (RateLimitsRepository), shared by every process on it. The hits that
 * arrive while a statement runs are counted together by the next (Batcher): one statement, and
 * one row update per bucket, for many requests, so a busy key's row is not one lock every request
 * queues on.
 */
export class SqlHitCounter implements HitCounter {
  private readonly batcher: Batcher<Hit, BucketWindow>;

  constructor(
    private readonly repository: RateLimitsRepository,
    private readonly clock: Clock,
  ) {
    this.batcher = new Batcher((hits) => this.write(hits), MAX_BATCH);
  }

  hit(bucket: string, windowMs: number): Promise<BucketWindow> {
    return this.batcher.submit({ bucket, windowMs });
  }

  private async write(hits: Hit[]): Promise<Settled<BucketWindow>[]> {
    const now = this.clock.now().getTime();
    const byBucket = new Map<string, BucketHits>();
    for (const { bucket, windowMs } of hits) {
      const counted = byBucket.get(bucket);
      if (counted) counted.n++;
      else byBucket.set(bucket, { bucket, n: 1, windowEndsAt: new Date(now + windowMs).toISOString() });
    }
    // Sorted: concurrent statements (other processes) lock the rows they share in one order.
    const buckets = [...byBucket.values()].sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
    const rows = new Map((await this.repository.count(buckets, new Date(now).toISOString())).map((row) => [row.bucket, row]));
    // The k-th hit of a bucket in this batch is its (count - n + k)-th in the window.
    const seen = new Map<string, number>();
    return hits.map(({ bucket }) => {
      const row = rows.get(bucket)!;
      const k = (seen.get(bucket) ?? 0) + 1;
      seen.set(bucket, k);
      return { ok: true, value: { count: row.count - byBucket.get(bucket)!.n + k, ttlMs: Date.parse(row.window_ends_at) - now } };
    });
  }
}

/** The counters for this storage: in memory on SQLite (one process by design), in the database on PostgreSQL. */
export function hitCounterFor(storage: Pick<Storage, 'db' | 'dialect'>, clock: Clock): HitCounter {
  return storage.dialect === 'postgres' ? new SqlHitCounter(new RateLimitsRepository(storage.db), clock) : new MemoryHitCounter(clock);
}

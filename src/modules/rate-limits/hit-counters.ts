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
  /** `max`: the bucket's limit (a counter may use it to count less precisely far from it). */
  hit(bucket: string, windowMs: number, max: number): BucketWindow | Promise<BucketWindow>;
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
  max: number;
}

/** Hits written in one statement at most. */
const MAX_BATCH = 500;
/** A lease is at most this share of what the last count left under the limit (1/16)... */
const LEASE_DIVISOR = 16;
/** ...and at most this many positions: one statement per thousand requests of a busy bucket. */
const MAX_LEASE = 1_000;
/** Buckets whose lease this process keeps (the least recently used forgotten first). */
const LEASED_BUCKETS = 10_000;

/**
 * Positions of a bucket's current window this process holds: the window's requests numbered
 * 1, 2, 3... across every process, `next` to `last` handed to this one and not yet given to a
 * request. `counted`: the window's count in the database when this process last wrote it.
 */
interface Lease {
  next: number;
  last: number;
  counted: number;
  endsAt: number;
}

/**
 * Counters in the database (RateLimitsRepository), shared by every process on it. A request's
 * count is its position in the bucket's window, unique across processes; a process takes
 * positions from the database in leases, so that a busy bucket costs one statement per lease
 * rather than per request: each statement takes the positions of the requests waiting for it
 * plus a lease of spare ones, at most 1/16 of what the last count left under the limit (so
 * leases shrink to nothing near the limit, where every request is counted in the database,
 * exactly) and at most MAX_LEASE. Requests get the leased positions in memory until they run out
 * or the window ends. What the leases cost: positions a process holds and never hands out are
 * lost to the other processes until the window ends, at most 1/16 of what remained under the
 * limit per process when it took them. Once a window's count passes the limit every later
 * request of that window is over it, so a process refuses them without a statement.
 * The hits that arrive while a statement runs are counted together by the next (Batcher): one
 * statement, and one row update per bucket, for many requests.
 */
export class SqlHitCounter implements HitCounter {
  private readonly batcher: Batcher<Hit, BucketWindow>;
  private readonly leases = new LruMap<Lease>(LEASED_BUCKETS);

  constructor(
    private readonly repository: RateLimitsRepository,
    private readonly clock: Clock,
  ) {
    this.batcher = new Batcher((hits) => this.write(hits), MAX_BATCH);
  }

  hit(bucket: string, windowMs: number, max: number): BucketWindow | Promise<BucketWindow> {
    return this.fromLease(bucket, max, this.clock.now().getTime()) ?? this.batcher.submit({ bucket, windowMs, max });
  }

  /** The next leased position of the bucket's window, or past the limit; undefined: ask the database. */
  private fromLease(bucket: string, max: number, now: number): BucketWindow | undefined {
    const lease = this.leases.get(bucket);
    if (lease === undefined || lease.endsAt <= now) return undefined;
    if (lease.next <= lease.last) return { count: lease.next++, ttlMs: lease.endsAt - now };
    if (lease.counted >= max) return { count: lease.counted + 1, ttlMs: lease.endsAt - now };
    return undefined;
  }

  private async write(hits: Hit[]): Promise<Settled<BucketWindow>[]> {
    const now = this.clock.now().getTime();
    const settled = new Array<Settled<BucketWindow>>(hits.length);
    const claims = new Map<string, BucketHits & { waiting: number[] }>();
    hits.forEach(({ bucket, windowMs, max }, i) => {
      // A statement that ended since this hit was submitted may have leased its bucket.
      const leased = this.fromLease(bucket, max, now);
      if (leased) {
        settled[i] = { ok: true, value: leased };
        return;
      }
      const claim = claims.get(bucket);
      if (claim) claim.waiting.push(i);
      else claims.set(bucket, { bucket, n: 0, windowEndsAt: new Date(now + windowMs).toISOString(), waiting: [i] });
    });
    if (claims.size === 0) return settled;
    for (const claim of claims.values()) {
      const { max } = hits[claim.waiting[0]];
      const lease = this.leases.get(claim.bucket);
      const counted = lease !== undefined && lease.endsAt > now ? lease.counted : 0;
      const spare = Math.min(MAX_LEASE, Math.floor(Math.max(0, max - counted - claim.waiting.length) / LEASE_DIVISOR));
      claim.n = claim.waiting.length + spare;
    }
    // Sorted: concurrent statements (other processes) lock the rows they share in one order.
    const buckets = [...claims.values()].sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
    for (const row of await this.repository.count(buckets, new Date(now).toISOString())) {
      const claim = claims.get(row.bucket)!;
      // This statement's positions are count - n + 1 to count: the waiting hits' first, the rest leased.
      const first = row.count - claim.n + 1;
      const endsAt = Date.parse(row.window_ends_at);
      claim.waiting.forEach((i, k) => (settled[i] = { ok: true, value: { count: first + k, ttlMs: endsAt - now } }));
      this.leases.set(row.bucket, { next: first + claim.waiting.length, last: row.count, counted: row.count, endsAt });
    }
    return settled;
  }
}

/** The counters for this storage: in memory on SQLite (one process by design), in the database on PostgreSQL. */
export function hitCounterFor(storage: Pick<Storage, 'db' | 'dialect'>, clock: Clock): HitCounter {
  return storage.dialect === 'postgres' ? new SqlHitCounter(new RateLimitsRepository(storage.db), clock) : new MemoryHitCounter(clock);
}

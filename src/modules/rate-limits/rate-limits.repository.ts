import { type Kysely, sql } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';

/** Migration 0083: a rate-limit bucket's counter in its current window. */
export interface RateLimitCountersTable {
  bucket: string;
  window_ends_at: string;
  count: number;
}

type RateLimitTables = { rate_limit_counters: RateLimitCountersTable };

/** `n` requests of one bucket to count at once; a new window, if one starts, ends at `windowEndsAt`. */
export interface BucketHits {
  bucket: string;
  n: number;
  windowEndsAt: string;
}

/**
 * The request counters of the rate limits. Buckets are client addresses and credentials, not
 * account data: the one table of the schema whose rows belong to no account or environment.
 */
export class RateLimitsRepository {
  private readonly db: Kysely<CoreTables & RateLimitTables>;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<RateLimitTables>();
  }

  /**
   * Counts each bucket's hits at `at` in one atomic statement: in the bucket's current window, or
   * in a new one when that ended by `at`. Answers each bucket's count after its hits and the end
   * of the window they were counted in. Buckets must be distinct (one row may change once per
   * statement); callers pass them sorted, so that two processes' statements lock shared rows in
   * the same order and never deadlock.
   */
  async count(hits: BucketHits[], at: string): Promise<{ bucket: string; count: number; window_ends_at: string }[]> {
    if (hits.length === 0) return [];
    const ended = sql<boolean>`rate_limit_counters.window_ends_at <= ${at}`;
    const rows = await this.db
      .insertInto('rate_limit_counters')
      .values(hits.map((h) => ({ bucket: h.bucket, window_ends_at: h.windowEndsAt, count: h.n })))
      .onConflict((oc) =>
        oc.column('bucket').doUpdateSet({
          count: sql<number>`case when ${ended} then excluded.count else rate_limit_counters.count + excluded.count end`,
          window_ends_at: sql<string>`case when ${ended} then excluded.window_ends_at else rate_limit_counters.window_ends_at end`,
        }),
      )
      .returning(['bucket', 'count', 'window_ends_at'])
      .execute();
    return rows.map((row) => ({ bucket: row.bucket, count: Number(row.count), window_ends_at: row.window_ends_at }));
  }

  /** Deletes the counters whose window ended before `before` (the hourly purge). */
  async purgeEndedBefore(before: string): Promise<void> {
    await this.db.deleteFrom('rate_limit_counters').where('window_ends_at', '<', before).execute();
  }
}

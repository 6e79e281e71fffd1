import { type Kysely, sql } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';

/** Migration 0079: who holds a deduplication window. */
export interface DedupKeysTable {
  env_id: string;
  fingerprint: string;
  account_id: string;
  tracking_id: string;
  claimed_at: string;
  expires_at: string;
}

/** Migration 0079: a throttling scope's counter in its current window. */
export interface ThrottleCountersTable {
  env_id: string;
  counter_key: string;
  account_id: string;
  window_ends_at: string;
  count: number;
  updated_at: string;
}

type GateTables = { dedup_keys: DedupKeysTable; throttle_counters: ThrottleCountersTable };

/**
 * The counters of deduplication and throttling, each changed by one atomic statement (an upsert
 * that decides on the row as it is under its lock, never a read and then a write), inside the
 * caller's transaction: concurrent workers, on both engines and across processes, agree.
 */
export class SendGatesRepository {
  private readonly db: Kysely<CoreTables & GateTables>;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<GateTables>();
  }

  /**
   * Claims `fingerprint` for `trackingId` until `expiresAt`, unless another send holds it past
   * `at`. Returns the holder afterwards: `trackingId` when this call claimed it.
   */
  async claimDedup(row: DedupKeysTable): Promise<{ tracking_id: string; expires_at: string }> {
    const expired = sql<boolean>`dedup_keys.expires_at <= excluded.claimed_at`;
    const pick = (column: 'tracking_id' | 'claimed_at' | 'expires_at') => sql<string>`case when ${expired} then excluded.${sql.ref(column)} else dedup_keys.${sql.ref(column)} end`;
    return this.db
      .insertInto('dedup_keys')
      .values(row)
      .onConflict((oc) => oc.columns(['env_id', 'fingerprint']).doUpdateSet({ tracking_id: pick('tracking_id'), claimed_at: pick('claimed_at'), expires_at: pick('expires_at') }))
      .returning(['tracking_id', 'expires_at'])
      .executeTakeFirstOrThrow();
  }

  /** Gives a claim back (its send was throttled, or did not commit its processing). */
  async releaseDedup(envId: string, fingerprint: string, trackingId: string): Promise<void> {
    await this.db.deleteFrom('dedup_keys').where('env_id', '=', envId).where('fingerprint', '=', fingerprint).where('tracking_id', '=', trackingId).execute();
  }

  /**
   * Counts `n` sends at `at` on a counter: in its current window, or in a new one ending at
   * `windowEndsAt` when the current one ended by `at`. Returns the count after these n and the
   * window they were counted in.
   */
  async count(key: { env_id: string; counter_key: string; account_id: string }, n: number, at: string, windowEndsAt: string): Promise<{ count: number; window_ends_at: string }> {
    const ended = sql<boolean>`throttle_counters.window_ends_at <= ${at}`;
    const row = await this.db
      .insertInto('throttle_counters')
      .values({ ...key, window_ends_at: windowEndsAt, count: n, updated_at: at })
      .onConflict((oc) =>
        oc.columns(['env_id', 'counter_key']).doUpdateSet({
          count: sql<number>`case when ${ended} then ${n} else throttle_counters.count + ${n} end`,
          window_ends_at: sql<string>`case when ${ended} then excluded.window_ends_at else throttle_counters.window_ends_at end`,
          updated_at: sql<string>`excluded.updated_at`,
        }),
      )
      .returning(['count', 'window_ends_at'])
      .executeTakeFirstOrThrow();
    return { count: Number(row.count), window_ends_at: row.window_ends_at };
  }

  /** Takes back `n` sends counted in the window ending `windowEndsAt` (their processing did not commit). */
  async uncount(envId: string, counterKey: string, n: number, windowEndsAt: string): Promise<void> {
    await this.db
      .updateTable('throttle_counters')
      .set({ count: sql<number>`count - ${n}` })
      .where('env_id', '=', envId)
      .where('counter_key', '=', counterKey)
      .where('window_ends_at', '=', windowEndsAt)
      .execute();
  }

  /** Deletes claims and counters whose window ended before `before` (the hourly purge). */
  async purgeEndedBefore(before: string): Promise<void> {
    await this.db.deleteFrom('dedup_keys').where('expires_at', '<', before).execute();
    await this.db.deleteFrom('throttle_counters').where('window_ends_at', '<', before).execute();
  }
}

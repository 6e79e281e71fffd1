import type SQLite from 'better-sqlite3';
import { CompiledQuery, type Kysely, PostgresAdapter, sql } from 'kysely';
import { heldSqlite } from '../../storage/db.js';
import { prepared } from '../../storage/pg-prepared.js';
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

/** Who holds a deduplication window after a claim. */
export interface DedupHolder {
  tracking_id: string;
  expires_at: string;
}

const CLAIM_COLUMNS = ['env_id', 'fingerprint', 'account_id', 'tracking_id', 'claimed_at', 'expires_at'] as const satisfies readonly (keyof DedupKeysTable)[];
/** A claim takes the row only when the holder's window ended by the claim's time; otherwise the row stays as it is. */
const CLAIM_UPDATE = (['tracking_id', 'claimed_at', 'expires_at'] as const)
  .map((column) => `${column} = CASE WHEN dedup_keys.expires_at <= excluded.claimed_at THEN excluded.${column} ELSE dedup_keys.${column} END`)
  .join(', ');
/** SQLite: one claim, a prepared statement run once per claim. */
const SQLITE_CLAIM = `INSERT INTO dedup_keys (${CLAIM_COLUMNS.join(', ')}) VALUES (${CLAIM_COLUMNS.map(() => '?').join(', ')})
  ON CONFLICT (env_id, fingerprint) DO UPDATE SET ${CLAIM_UPDATE} RETURNING tracking_id, expires_at`;
/**
 * PostgreSQL: a batch's claims in one prepared statement, one array per column (its text and its
 * 6 parameters the same whatever the batch's size), the rows taken in the arrays' order.
 */
const PG_CLAIM_MANY = prepared(
  'dedup_claim_many',
  `INSERT INTO dedup_keys (${CLAIM_COLUMNS.join(', ')}) SELECT * FROM unnest(${CLAIM_COLUMNS.map((_, i) => `$${i + 1}::text[]`).join(', ')})
  ON CONFLICT (env_id, fingerprint) DO UPDATE SET ${CLAIM_UPDATE} RETURNING env_id, fingerprint, tracking_id, expires_at`,
);

/**
 * The counters of deduplication and throttling, each changed by one atomic statement (an upsert
 * that decides on the row as it is under its lock, never a read and then a write), inside the
 * caller's transaction: concurrent workers, on both engines and across processes, agree.
 */
export class SendGatesRepository {
  private readonly db: Kysely<CoreTables & GateTables>;
  private readonly sqlite: SQLite.Database | null;
  private readonly postgres: boolean;
  /**
   * `sqlite`: the SQLite connection, for the claims' prepared statement inside the caller's
   * transaction (Kysely's building and compiling of the upsert cost several times the statement
   * itself, once per deduplicated send: measured with bench gates-instructions).
   */
  constructor(db: Kysely<CoreTables>, sqlite?: SQLite.Database) {
    this.db = db.withTables<GateTables>();
    this.sqlite = heldSqlite(db, sqlite);
    this.postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  }

  /**
   * Claims each row's `fingerprint` for its `tracking_id` until its `expires_at`, unless another
   * send holds it past the row's `claimed_at`. Returns, per row in order, the holder afterwards
   * (the row's `tracking_id` when it claimed it). The rows name distinct fingerprints and are
   * claimed in their order (the caller's lock order).
   */
  async claimDedups(rows: DedupKeysTable[]): Promise<DedupHolder[]> {
    if (rows.length === 0) return [];
    if (this.sqlite) {
      const claim = this.sqlite.prepare(SQLITE_CLAIM);
      return rows.map((row) => claim.get(...CLAIM_COLUMNS.map((column) => row[column])) as DedupHolder);
    }
    if (this.postgres) {
      const columns = CLAIM_COLUMNS.map((column) => rows.map((row) => row[column]));
      const { rows: holders } = await this.db.executeQuery<DedupHolder & { env_id: string; fingerprint: string }>(CompiledQuery.raw(PG_CLAIM_MANY, columns));
      const byKey = new Map(holders.map((holder) => [`${holder.env_id}\u0000${holder.fingerprint}`, holder]));
      return rows.map((row) => byKey.get(`${row.env_id}\u0000${row.fingerprint}`)!);
    }
    // SQLite without its connection held (outside a transaction): the same statement through Kysely.
    const holders: DedupHolder[] = [];
    for (const row of rows) {
      const { rows: [holder] } = await this.db.executeQuery<DedupHolder>(CompiledQuery.raw(SQLITE_CLAIM, CLAIM_COLUMNS.map((column) => row[column])));
      holders.push(holder);
    }
    return holders;
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

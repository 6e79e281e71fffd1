import type SQLite from 'better-sqlite3';
import { CompiledQuery, type Kysely } from 'kysely';
import { heldSqlite } from '../../storage/db.js';
import { deferred, prepared } from '../../storage/pg-prepared.js';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingDb, SendingTables } from './sending.tables.js';

const ENSURE = 'INSERT INTO usage_counters (account_id, cycle_start, messages) VALUES (?, ?, 0) ON CONFLICT (account_id, cycle_start) DO NOTHING';
const USED = 'SELECT messages FROM usage_counters WHERE account_id = ? AND cycle_start = ?';
const INCREMENT = 'UPDATE usage_counters SET messages = messages + ? WHERE account_id = ? AND cycle_start = ? AND messages <= ? RETURNING messages';
const PG_INCREMENT = prepared(
  'usage_increment',
  'UPDATE usage_counters SET messages = messages + $1::integer WHERE account_id = $2 AND cycle_start = $3 AND messages <= $4::integer RETURNING messages',
);
/** Migration 0094's function; its refusal is SQLSTATE UC001 (isUsageCapRefusal). */
const PG_COUNT_OR_ABORT = deferred(prepared('usage_count_or_abort', 'SELECT clarion_count_usage($1, $2, $3::integer, $4::integer)'));
const USAGE_CAP_SQLSTATE = 'UC001';

/** Whether a PostgreSQL error is countOrAbort's refusal (the messages did not fit under the cap). */
export function isUsageCapRefusal(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === USAGE_CAP_SQLSTATE;
}

/**
 * Usage counters. Given the SQLite connection, the batch methods of the send intake run as
 * prepared statements inside the caller's transaction: Kysely's building and compiling cost
 * more than these one-row statements themselves, once per group commit (measured, issue 11).
 */
export class UsageRepository {
  private readonly db: SendingDb;
  private readonly sqlite: SQLite.Database | null;
  constructor(db: Kysely<CoreTables>, sqlite?: SQLite.Database) {
    this.db = db.withTables<SendingTables>();
    this.sqlite = heldSqlite(db, sqlite);
  }

  /**
   * Counts `count` messages against the cap of the cycle, atomically: the cycle's count once
   * they are counted, or null (nothing counted) when they do not all fit. Concurrent senders
   * cannot overshoot: the guarded UPDATE serialises on the counter row.
   */
  async tryCount(accountId: string, cycleStart: string, cap: number, count = 1): Promise<number | null> {
    if (this.sqlite) {
      const increment = () => (this.sqlite!.prepare(INCREMENT).get(count, accountId, cycleStart, cap - count) as { messages: number } | undefined)?.messages ?? null;
      const counted = increment();
      if (counted !== null) return counted;
      this.sqlite.prepare(ENSURE).run(accountId, cycleStart);
      return increment();
    }
    const counted = await this.increment(accountId, cycleStart, cap, count);
    if (counted !== null) return counted;
    // First message of the cycle (no counter yet), or the cap is reached.
    await this.db
      .insertInto('usage_counters')
      .values({ account_id: accountId, cycle_start: cycleStart, messages: 0 })
      .onConflict((oc) => oc.columns(['account_id', 'cycle_start']).doNothing())
      .execute();
    return this.increment(accountId, cycleStart, cap, count);
  }

  /**
   * PostgreSQL, in the caller's transaction: counts as tryCount does, but sent without waiting
   * for its answer (a deferred statement, sent with what follows it: the intake's COMMIT). When
   * the messages do not fit, nothing is counted and the transaction fails: the next statement the
   * caller waits for, or its COMMIT, throws an error for which isUsageCapRefusal() is true.
   * Measured (issue 11, CLARION_ROLE=api on PostgreSQL): a group commit's round trips 3 -> 2.
   */
  async countOrAbort(accountId: string, cycleStart: string, cap: number, count: number): Promise<void> {
    await this.db.executeQuery(CompiledQuery.raw(PG_COUNT_OR_ABORT, [accountId, cycleStart, count, cap]));
  }

  /** PostgreSQL (a prepared statement: run by every group commit). */
  private async increment(accountId: string, cycleStart: string, cap: number, count: number): Promise<number | null> {
    const { rows } = await this.db.executeQuery<{ messages: number }>(CompiledQuery.raw(PG_INCREMENT, [count, accountId, cycleStart, cap - count]));
    return rows[0]?.messages ?? null;
  }

  /**
   * Creates the counters of these cycles that do not exist yet. As a batch's first statement it
   * also takes SQLite's write lock before any read, so the batch's reads cannot go stale.
   */
  async ensureCounters(cycles: { accountId: string; cycleStart: string }[]): Promise<void> {
    if (cycles.length === 0) return;
    if (this.sqlite) {
      for (const c of cycles) this.sqlite.prepare(ENSURE).run(c.accountId, c.cycleStart);
      return;
    }
    await this.db
      .insertInto('usage_counters')
      .values(cycles.map((c) => ({ account_id: c.accountId, cycle_start: c.cycleStart, messages: 0 })))
      .onConflict((oc) => oc.columns(['account_id', 'cycle_start']).doNothing())
      .execute();
  }

  /** Messages counted in these cycles, keyed `accountId NUL cycleStart`. */
  async usedMany(cycles: { accountId: string; cycleStart: string }[]): Promise<Map<string, number>> {
    const used = new Map<string, number>();
    if (cycles.length === 0) return used;
    if (this.sqlite) {
      for (const c of cycles) {
        const row = this.sqlite.prepare(USED).get(c.accountId, c.cycleStart) as { messages: number } | undefined;
        if (row) used.set(`${c.accountId}\u0000${c.cycleStart}`, row.messages);
      }
      return used;
    }
    const rows = await this.db
      .selectFrom('usage_counters')
      .select(['account_id', 'cycle_start', 'messages'])
      .where((eb) => eb.or(cycles.map((c) => eb.and([eb('account_id', '=', c.accountId), eb('cycle_start', '=', c.cycleStart)]))))
      .execute();
    for (const row of rows) used.set(`${row.account_id}\u0000${row.cycle_start}`, row.messages);
    return used;
  }

  async used(accountId: string, cycleStart: string): Promise<number> {
    const row = await this.db
      .selectFrom('usage_counters')
      .select('messages')
      .where('account_id', '=', accountId)
      .where('cycle_start', '=', cycleStart)
      .executeTakeFirst();
    return row?.messages ?? 0;
  }
}

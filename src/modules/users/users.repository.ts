import type SQLite from 'better-sqlite3';
import { CompiledQuery, type Kysely, PostgresAdapter, type Selectable, type Updateable } from 'kysely';
import { columnList } from '../../storage/bulk-insert.js';
import { heldSqlite } from '../../storage/db.js';
import { prepared } from '../../storage/pg-prepared.js';
import type { CoreTables, UsersTable } from '../../storage/schema.js';

export type UserRow = Selectable<UsersTable>;

/** Every column of a user row (the compiler checks the list is whole). */
const USER_COLUMNS = columnList<UserRow>({
  env_id: 1,
  id: 1,
  account_id: 1,
  email: 1,
  number: 1,
  push_tokens: 1,
  web_push_tokens: 1,
  timezone: 1,
  slack_channel: 1,
  slack_token: 1,
  properties: 1,
  suppressions: 1,
  last_seen_time: 1,
  created_at: 1,
  updated_at: 1,
}).join(', ');
/**
 * PostgreSQL findMany, prepared (the send intake reads its batch's recipients on every group
 * commit): one text whatever the number of ids, its columns named so that a column added by a
 * migration does not invalidate the prepared statement.
 */
const PG_FIND_MANY = prepared('users_find_many', `SELECT ${USER_COLUMNS} FROM users WHERE account_id = $1 AND env_id = $2 AND id = ANY($3::text[])`);
const PG_FIND_MANY_LOCKED = prepared(
  'users_find_many_locked',
  `SELECT ${USER_COLUMNS} FROM users WHERE account_id = $1 AND env_id = $2 AND id = ANY($3::text[]) ORDER BY id FOR UPDATE`,
);

export interface UserCursor {
  createdAt: string;
  id: string;
}

/** Every query names both the account and the environment of the caller. */
export class UsersRepository {
  /** `lockRows`: take a row lock on reads made for a read-modify-write (PostgreSQL; SQLite serializes writers itself). */
  private readonly sqlite: SQLite.Database | null;
  /**
   * `sqlite`: the SQLite connection, for findMany as a prepared statement inside the caller's
   * transaction (the send intake reads its batch's recipients on every group commit; Kysely's
   * building and compiling cost more than the read, measured in issue 11).
   */
  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly lockRows = false,
    sqlite?: SQLite.Database,
  ) {
    this.sqlite = heldSqlite(db, sqlite);
  }

  /** Inserts unless the user exists; true when this call created it. */
  async insertIfAbsent(row: UserRow): Promise<boolean> {
    const inserted = await this.db
      .insertInto('users')
      .values(row)
      .onConflict((oc) => oc.columns(['env_id', 'id']).doNothing())
      .returning('id')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  /**
   * Inserts the users that do not exist yet; returns the ids this call created (one already
   * present, created by a concurrent request, is left as it is and not returned).
   */
  async insertManyIfAbsent(rows: UserRow[]): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    const inserted = await this.db
      .insertInto('users')
      .values(rows)
      .onConflict((oc) => oc.columns(['env_id', 'id']).doNothing())
      .returning('id')
      .execute();
    return new Set(inserted.map((r) => r.id));
  }

  /** Users of one environment by id; with `forUpdate`, locked as findForUpdate does, in id order. */
  findMany(accountId: string, envId: string, userIds: string[], forUpdate = false): Promise<UserRow[]> {
    if (userIds.length === 0) return Promise.resolve([]);
    if (this.sqlite) {
      const list = userIds.map(() => '?').join(', ');
      const statement = this.sqlite.prepare(`SELECT * FROM users WHERE account_id = ? AND env_id = ? AND id IN (${list})`);
      return Promise.resolve(statement.all(accountId, envId, ...userIds) as UserRow[]);
    }
    if (this.db.getExecutor().adapter instanceof PostgresAdapter) {
      const text = forUpdate && this.lockRows ? PG_FIND_MANY_LOCKED : PG_FIND_MANY;
      return this.db.executeQuery<UserRow>(CompiledQuery.raw(text, [accountId, envId, userIds])).then((result) => result.rows);
    }
    return this.db
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('id', 'in', userIds)
      .execute();
  }

  find(accountId: string, envId: string, userId: string): Promise<UserRow | undefined> {
    return this.db
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('id', '=', userId)
      .executeTakeFirst();
  }

  /** The same read, locking the row until the surrounding transaction ends (when lockRows). */
  findForUpdate(accountId: string, envId: string, userId: string): Promise<UserRow | undefined> {
    let query = this.db
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('id', '=', userId);
    if (this.lockRows) query = query.forUpdate();
    return query.executeTakeFirst();
  }

  async update(accountId: string, envId: string, userId: string, patch: Updateable<UsersTable>): Promise<void> {
    await this.db
      .updateTable('users')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('id', '=', userId)
      .execute();
  }

  async delete(accountId: string, envId: string, userId: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('users')
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('id', '=', userId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Newest first on (created_at, id); `after` is the last row of the previous page. */
  list(accountId: string, envId: string, limit: number, after?: UserCursor): Promise<UserRow[]> {
    let query = this.db
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId);
    if (after) {
      query = query.where((eb) =>
        eb.or([eb('created_at', '<', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('id', '<', after.id)])]),
      );
    }
    return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
  }
}

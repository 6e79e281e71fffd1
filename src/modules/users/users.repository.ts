import type SQLite from 'better-sqlite3';
import type { Kysely, Selectable, Updateable } from 'kysely';
import { heldSqlite } from '../../storage/db.js';
import type { CoreTables, UsersTable } from '../../storage/schema.js';

export type UserRow = Selectable<UsersTable>;

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
    let query = this.db
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('id', 'in', userIds);
    if (forUpdate && this.lockRows) query = query.orderBy('id').forUpdate();
    return query.execute();
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

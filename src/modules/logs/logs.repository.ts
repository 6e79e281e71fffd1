import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { LogQueriesTable, MessageRow } from '../sending/sending.tables.js';
import type { DeliveryEventsTable, DeliveryTables } from '../delivery/delivery.tables.js';
import type { LogsDb, LogsTables } from './logs.tables.js';

export interface LogFilters {
  accountId: string;
  /** null: every environment of the account; []: none. */
  envIds: string[] | null;
  from: string | null;
  to: string | null;
  userId: string | null;
  notificationIds: string[] | null;
  /** Any of these users (the older server SDK's list form of userFilter). */
  userIds?: string[] | null;
  /** Only these sends (the older server SDK's trackingIds). */
  trackingIds?: string[] | null;
}

/** Rows per insert of a query's result: 4 parameters each, far below either engine's cap. */
const RESULT_INSERT_CHUNK = 500;

export class LogsRepository {
  private readonly db: LogsDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<LogsTables>();
  }

  insertQuery(row: Selectable<LogQueriesTable>): Promise<unknown> {
    return this.db.insertInto('log_queries').values(row).execute();
  }

  /** A query as its caller sees it: same account and same environment (null: an account-wide caller). */
  findQuery(accountId: string, envId: string, id: string): Promise<Selectable<LogQueriesTable> | undefined> {
    return this.db
      .selectFrom('log_queries')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  findQueryForWork(id: string): Promise<Selectable<LogQueriesTable> | undefined> {
    return this.db.selectFrom('log_queries').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /**
   * Stores the result and marks the query Complete in one transaction. A rerun (at-least-once
   * jobs) replaces the rows; a query no longer Running is left as it is.
   */
  async completeQuery(id: string, accountId: string, logs: string[], at: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const done = await trx
        .updateTable('log_queries')
        .set({ status: 'Complete', result: null, completed_at: at })
        .where('id', '=', id)
        .where('status', '=', 'Running')
        .executeTakeFirst();
      if (Number(done.numUpdatedRows) === 0) return;
      await trx.deleteFrom('log_query_results').where('query_id', '=', id).execute();
      for (let i = 0; i < logs.length; i += RESULT_INSERT_CHUNK) {
        const rows = logs.slice(i, i + RESULT_INSERT_CHUNK).map((log, j) => ({ query_id: id, account_id: accountId, position: i + j, log }));
        await trx.insertInto('log_query_results').values(rows).execute();
      }
    });
  }

  async failQuery(id: string, error: string, at: string): Promise<void> {
    await this.db.updateTable('log_queries').set({ status: 'Failed', error, completed_at: at }).where('id', '=', id).where('status', '=', 'Running').execute();
  }

  /** Stored logs of a query from `position` on, at most `limit`. */
  async resultPage(accountId: string, queryId: string, position: number, limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom('log_query_results')
      .select('log')
      .where('account_id', '=', accountId)
      .where('query_id', '=', queryId)
      .where('position', '>=', position)
      .orderBy('position')
      .limit(limit)
      .execute();
    return rows.map((r) => r.log);
  }

  async purgeQueriesBefore(before: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const old = trx.selectFrom('log_queries').select('id').where('created_at', '<', before);
      await trx.deleteFrom('log_query_results').where('query_id', 'in', old).execute();
      await trx.deleteFrom('log_queries').where('created_at', '<', before).execute();
    });
  }

  /** Messages matching the stored filters (all combined with AND), newest first. */
  /** The environment's ledger transitions, newest first, from before the event id `before` (null: the newest). */
  events(accountId: string, envId: string, before: number | null, limit: number): Promise<Selectable<DeliveryEventsTable>[]> {
    let q = this.db
      .withTables<DeliveryTables>()
      .selectFrom('delivery_events')
      .selectAll()
      .where('env_id', '=', envId)
      .where('account_id', '=', accountId);
    if (before !== null) q = q.where('id', '<', before);
    return q.orderBy('id', 'desc').limit(limit).execute();
  }

  findMessages(f: LogFilters, limit: number): Promise<MessageRow[]> {
    let q = this.db.selectFrom('messages').selectAll().where('account_id', '=', f.accountId);
    if (f.envIds) {
      if (f.envIds.length === 0) return Promise.resolve([]);
      q = q.where('env_id', 'in', f.envIds);
    }
    if (f.from) q = q.where('received_at', '>=', f.from);
    if (f.to) q = q.where('received_at', '<=', f.to);
    if (f.userId) q = q.where('user_id', '=', f.userId);
    if (f.userIds?.length) q = q.where('user_id', 'in', f.userIds);
    if (f.trackingIds?.length) q = q.where('tracking_id', 'in', f.trackingIds);
    if (f.notificationIds) q = q.where('notification_id', 'in', f.notificationIds);
    return q.orderBy('received_at', 'desc').orderBy('tracking_id', 'desc').limit(limit).execute();
  }
}

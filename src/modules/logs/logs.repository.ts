import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { LogQueriesTable, MessageRow, SendingDb, SendingTables } from '../sending/sending.tables.js';

export interface LogFilters {
  accountId: string;
  /** null: every environment of the account; []: none. */
  envIds: string[] | null;
  from: string | null;
  to: string | null;
  userId: string | null;
  notificationIds: string[] | null;
}

export class LogsRepository {
  private readonly db: SendingDb;
  constructor(db: Kysely<CoreTables> | Kysely<any>) {
    this.db = (db as Kysely<CoreTables>).withTables<SendingTables>();
  }

  insertQuery(row: Selectable<LogQueriesTable>): Promise<unknown> {
    return this.db.insertInto('log_queries').values(row).execute();
  }

  findQuery(accountId: string, id: string): Promise<Selectable<LogQueriesTable> | undefined> {
    return this.db.selectFrom('log_queries').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
  }

  findQueryForWork(id: string): Promise<Selectable<LogQueriesTable> | undefined> {
    return this.db.selectFrom('log_queries').selectAll().where('id', '=', id).executeTakeFirst();
  }

  async completeQuery(id: string, result: string, at: string): Promise<void> {
    await this.db.updateTable('log_queries').set({ status: 'Complete', result, completed_at: at }).where('id', '=', id).execute();
  }

  async purgeQueriesBefore(before: string): Promise<void> {
    await this.db.deleteFrom('log_queries').where('created_at', '<', before).execute();
  }

  /** Messages matching the stored filters (all combined with AND), newest first. */
  findMessages(f: LogFilters, limit: number): Promise<MessageRow[]> {
    let q = this.db.selectFrom('messages').selectAll().where('account_id', '=', f.accountId);
    if (f.envIds) {
      if (f.envIds.length === 0) return Promise.resolve([]);
      q = q.where('env_id', 'in', f.envIds);
    }
    if (f.from) q = q.where('received_at', '>=', f.from);
    if (f.to) q = q.where('received_at', '<=', f.to);
    if (f.userId) q = q.where('user_id', '=', f.userId);
    if (f.notificationIds) q = q.where('notification_id', 'in', f.notificationIds);
    return q.orderBy('received_at', 'desc').orderBy('tracking_id', 'desc').limit(limit).execute();
  }
}

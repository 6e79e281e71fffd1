import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { PreferencesDb, UserPreferencesTable } from './preferences.tables.js';

/** Kysely only: per-user, per-type, per-channel delivery options, scoped by account and environment. */
export class PreferencesRepository {
  private readonly db: PreferencesDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<{ user_preferences: UserPreferencesTable }>();
  }

  /** Sets one option (insert or replace); created_at is kept on replace. */
  async upsert(row: UserPreferencesTable): Promise<void> {
    await this.db
      .insertInto('user_preferences')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['env_id', 'user_id', 'notification_id', 'channel']).doUpdateSet({ delivery: row.delivery, source: row.source, updated_at: row.updated_at }),
      )
      .execute();
  }

  /** The options of these users for these types, in one query (a batch of sends plans with it). */
  forUsers(accountId: string, envId: string, userIds: string[], notificationIds: string[]): Promise<UserPreferencesTable[]> {
    if (userIds.length === 0 || notificationIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('user_preferences')
      .selectAll()
      .where('env_id', '=', envId)
      .where('account_id', '=', accountId)
      .where('user_id', 'in', userIds)
      .where('notification_id', 'in', notificationIds)
      .execute();
  }

  /** Every option of one user. */
  ofUser(accountId: string, envId: string, userId: string): Promise<UserPreferencesTable[]> {
    return this.db.selectFrom('user_preferences').selectAll().where('env_id', '=', envId).where('account_id', '=', accountId).where('user_id', '=', userId).execute();
  }
}

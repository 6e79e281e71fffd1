import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { PreferencesDb, UserPreferencesTable } from './preferences.tables.js';

/** One preference's key inside a user's preferences. */
export interface PreferenceKey {
  notificationId: string;
  subNotificationId: string;
  channel: string;
}

/**
 * Kysely only: per-user, per-type (and sub-notification), per-channel delivery options, scoped by
 * account and environment. Pass a transaction to join one. Written only by PreferencesService (and
 * SubNotificationsService, which removes a deleted sub-notification's options).
 */
export class PreferencesRepository {
  private readonly db: PreferencesDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<{ user_preferences: UserPreferencesTable }>();
  }

  /**
   * Sets options: inserts new ones, replaces those whose delivery changes (created_at is kept),
   * leaves equal ones alone. Answers the rows it inserted or changed, decided row by row by the
   * database, so two concurrent writes of the same option report it changed once.
   */
  async upsert(rows: UserPreferencesTable[]): Promise<UserPreferencesTable[]> {
    if (rows.length === 0) return [];
    return this.db
      .insertInto('user_preferences')
      .values(rows)
      .onConflict((oc) =>
        oc
          .columns(['env_id', 'user_id', 'notification_id', 'sub_notification_id', 'channel'])
          .doUpdateSet((eb) => ({
            delivery: eb.ref('excluded.delivery'),
            source: eb.ref('excluded.source'),
            updated_at: eb.ref('excluded.updated_at'),
          }))
          .where((eb) => eb('user_preferences.delivery', '<>', eb.ref('excluded.delivery'))),
      )
      .returningAll()
      .execute();
  }

  /** The options of these users for these types (every sub-notification), in one query: a batch of sends plans with it. */
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

  /** Every option of one user, in a stable order. */
  ofUser(accountId: string, envId: string, userId: string): Promise<UserPreferencesTable[]> {
    return this.db
      .selectFrom('user_preferences')
      .selectAll()
      .where('env_id', '=', envId)
      .where('account_id', '=', accountId)
      .where('user_id', '=', userId)
      .orderBy('notification_id')
      .orderBy('sub_notification_id')
      .orderBy('channel')
      .execute();
  }

  /**
   * Deletes a user's options: all of them, those of one type (with its sub-notifications), or
   * those of one sub-notification. Answers how many went.
   */
  async delete(accountId: string, envId: string, userId: string, filter: { notificationId?: string; subNotificationId?: string }): Promise<number> {
    let query = this.db.deleteFrom('user_preferences').where('env_id', '=', envId).where('account_id', '=', accountId).where('user_id', '=', userId);
    if (filter.notificationId !== undefined) query = query.where('notification_id', '=', filter.notificationId);
    if (filter.subNotificationId !== undefined) query = query.where('sub_notification_id', '=', filter.subNotificationId);
    const result = await query.executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Deletes every user's options of one sub-notification (it was deleted); answers how many went. */
  async deleteOfSubNotification(accountId: string, envId: string, notificationId: string, subNotificationId: string): Promise<number> {
    const result = await this.db
      .deleteFrom('user_preferences')
      .where('env_id', '=', envId)
      .where('account_id', '=', accountId)
      .where('notification_id', '=', notificationId)
      .where('sub_notification_id', '=', subNotificationId)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

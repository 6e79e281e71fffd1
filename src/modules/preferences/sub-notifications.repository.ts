import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { SubNotificationsTable } from './preferences.tables.js';

/** Kysely only: the sub-notifications of types, scoped by account and environment. Pass a transaction to join one. */
export class SubNotificationsRepository {
  private readonly db: Kysely<CoreTables & { sub_notifications: SubNotificationsTable }>;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<{ sub_notifications: SubNotificationsTable }>();
  }

  /** Creates it, or changes its title (created_at is kept). */
  async upsert(row: SubNotificationsTable): Promise<void> {
    await this.db
      .insertInto('sub_notifications')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['env_id', 'notification_id', 'sub_notification_id']).doUpdateSet((eb) => ({ title: eb.ref('excluded.title'), updated_at: eb.ref('excluded.updated_at') })),
      )
      .execute();
  }

  /** True when it existed. */
  async delete(accountId: string, envId: string, notificationId: string, subNotificationId: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('sub_notifications')
      .where('env_id', '=', envId)
      .where('account_id', '=', accountId)
      .where('notification_id', '=', notificationId)
      .where('sub_notification_id', '=', subNotificationId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Every sub-notification of the environment, by type then id. */
  list(accountId: string, envId: string): Promise<SubNotificationsTable[]> {
    return this.db
      .selectFrom('sub_notifications')
      .selectAll()
      .where('env_id', '=', envId)
      .where('account_id', '=', accountId)
      .orderBy('notification_id')
      .orderBy('sub_notification_id')
      .execute();
  }
}

import type { Kysely } from 'kysely';

/**
 * Issue 13, items 6 and 8.
 * - `sub_notifications`: the sub-notifications of a type with their titles (the older server
 *   SDK's createSubNotification), listed in GetPreferencesResponse. They go with their type
 *   (foreign key, cascade), as its templates do.
 * - Indexes for the per-type retention purge, which deletes one type's in-app notifications and
 *   logs older than its `retention` days: without them the hourly purge would walk every old row
 *   of the environment for each type that sets a retention.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sub_notifications')
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    .addColumn('sub_notification_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sub_notifications_pk', ['env_id', 'notification_id', 'sub_notification_id'])
    .addForeignKeyConstraint('sub_notifications_type_fk', ['env_id', 'notification_id'], 'notification_types', ['env_id', 'notification_id'], (fk) =>
      fk.onDelete('cascade'),
    )
    .execute();
  await db.schema.createIndex('inapp_type_created').on('inapp_notifications').columns(['env_id', 'notification_id', 'created_at']).execute();
  await db.schema.createIndex('messages_type_received').on('messages').columns(['env_id', 'notification_id', 'received_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('messages_type_received').execute();
  await db.schema.dropIndex('inapp_type_created').execute();
  await db.schema.dropTable('sub_notifications').execute();
}

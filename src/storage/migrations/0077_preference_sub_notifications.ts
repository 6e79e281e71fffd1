import { type Kysely, sql } from 'kysely';

/**
 * Preferences per sub-notification (issue 13). `user_preferences` gains `sub_notification_id`
 * in its key: '' is the type's own option, any other value the option of that sub-notification
 * of the type (the send's `subNotificationId`), which takes precedence over the type's. A key
 * column cannot be added in place on SQLite, so the table is rebuilt and its rows copied (every
 * existing row is a type-level option, '').
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('user_preferences_v2')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    // '' for the type itself; a key column cannot be null.
    .addColumn('sub_notification_id', 'text', (c) => c.notNull().defaultTo(''))
    // The log form of the channel (email, sms, inapp, ...).
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    // A delivery option: off | instant (the digest options come with digests).
    .addColumn('delivery', 'text', (c) => c.notNull())
    // What set it: 'unsubscribe', 'api' (server credentials), 'user' (the in-app client).
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_preferences_v2_pk', ['env_id', 'user_id', 'notification_id', 'sub_notification_id', 'channel'])
    .execute();
  await sql`insert into user_preferences_v2 (env_id, user_id, notification_id, sub_notification_id, channel, account_id, delivery, source, created_at, updated_at)
    select env_id, user_id, notification_id, '', channel, account_id, delivery, source, created_at, updated_at from user_preferences`.execute(db);
  await db.schema.dropTable('user_preferences').execute();
  await db.schema.alterTable('user_preferences_v2').renameTo('user_preferences').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('user_preferences_v1')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('delivery', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_preferences_pk', ['env_id', 'user_id', 'notification_id', 'channel'])
    .execute();
  await sql`insert into user_preferences_v1 (env_id, user_id, notification_id, channel, account_id, delivery, source, created_at, updated_at)
    select env_id, user_id, notification_id, channel, account_id, delivery, source, created_at, updated_at from user_preferences where sub_notification_id = ''`.execute(db);
  await db.schema.dropTable('user_preferences').execute();
  await db.schema.alterTable('user_preferences_v1').renameTo('user_preferences').execute();
}

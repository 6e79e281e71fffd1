import type { Kysely } from 'kysely';

/**
 * Email engagement (modules/engagement) and per-user preferences (modules/preferences).
 *
 * - `email_tracking_settings`: an environment's open and click tracking switches. No row means
 *   the defaults (both on), so existing environments track without a write.
 * - `user_preferences`: one delivery option per user, notification type and channel. The
 *   one-click unsubscribe writes `off` for (user, type, email); issue 13's preferences API reads
 *   and writes the same rows, so an unsubscribe shows there. Keyed by environment first: every
 *   read (routing a batch, listing a user's preferences) is inside one environment.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('email_tracking_settings')
    .addColumn('env_id', 'text', (c) => c.primaryKey().references('environments.client_id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('track_opens', 'integer', (c) => c.notNull())
    .addColumn('track_clicks', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('user_preferences')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    // The log form of the channel (email, sms, inapp, ...).
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    // off | instant (issue 13 may add batching options).
    .addColumn('delivery', 'text', (c) => c.notNull())
    // What set it: 'unsubscribe' (List-Unsubscribe / the unsubscribe page), 'api', 'user'.
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_preferences_pk', ['env_id', 'user_id', 'notification_id', 'channel'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('user_preferences').execute();
  await db.schema.dropTable('email_tracking_settings').execute();
}

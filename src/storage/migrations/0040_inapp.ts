import type { Kysely } from 'kysely';

// In-app notifications, one row per (environment, user, message). The message trackingId is the
// notification `id` the in-app clients see and patch, so it is unique per user and environment,
// which also makes a retried delivery a no-op.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('inapp_notifications')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('tracking_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    .addColumn('sub_notification_id', 'text')
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('redirect_url', 'text')
    .addColumn('image_url', 'text')
    .addColumn('delivery_options', 'text')
    .addColumn('template', 'text')
    .addColumn('parameters', 'text')
    .addColumn('date', 'text', (c) => c.notNull())
    .addColumn('seen', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('opened', 'text')
    .addColumn('clicked', 'text')
    .addColumn('archived', 'text')
    .addColumn('actioned1', 'text')
    .addColumn('actioned2', 'text')
    .addColumn('replies', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('exp_date', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('inapp_notifications_pk', ['env_id', 'user_id', 'tracking_id'])
    .execute();
  // Newest-first pages of one user's list.
  await db.schema.createIndex('inapp_user_date').on('inapp_notifications').columns(['env_id', 'user_id', 'date', 'tracking_id']).execute();
  await db.schema.createIndex('inapp_user_unseen').on('inapp_notifications').columns(['env_id', 'user_id', 'seen']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('inapp_notifications').ifExists().execute();
}

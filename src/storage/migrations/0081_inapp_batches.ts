import type { Kysely } from 'kysely';

/**
 * In-app batching (issue 13, item 4).
 *
 * - `inapp_batches`: per (environment, user, notification type, batching key value), the batch
 *   currently collecting: the id of its in-app notification (the trackingId of the send that
 *   opened it), when its window closes and how many sends it holds. One row per key, replaced
 *   when a send arrives after `closes_at`; the key is the primary key, so an upsert on it is
 *   what keeps concurrent sends from opening two batches (ON CONFLICT DO UPDATE on both engines).
 * - `inapp_batch_items`: one row per send that went into a batch (the batch template's `_items`,
 *   and what makes a retried delivery of the same send a no-op), keyed like in-app notifications.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('inapp_batches')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    // The batching key's value for the sends of this batch ('' when the key renders empty).
    .addColumn('batch_key', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    // The in-app notification the batch is shown as (its tracking_id).
    .addColumn('batch_id', 'text', (c) => c.notNull())
    .addColumn('opened_at', 'text', (c) => c.notNull())
    .addColumn('closes_at', 'text', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('inapp_batches_pk', ['env_id', 'user_id', 'notification_id', 'batch_key'])
    .execute();

  await db.schema
    .createTable('inapp_batch_items')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    // The send's trackingId.
    .addColumn('tracking_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('batch_id', 'text', (c) => c.notNull())
    // 1 for the send that opened the batch, then 2, 3, ...: the batch's count once this send joined.
    .addColumn('seq', 'integer', (c) => c.notNull())
    // The send's parameters (JSON): one entry of the batch template's `_items`.
    .addColumn('parameters', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('inapp_batch_items_pk', ['env_id', 'user_id', 'tracking_id'])
    .execute();
  // The latest items of one batch.
  await db.schema.createIndex('inapp_batch_items_batch').on('inapp_batch_items').columns(['env_id', 'user_id', 'batch_id', 'seq']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('inapp_batch_items').ifExists().execute();
  await db.schema.dropTable('inapp_batches').ifExists().execute();
}

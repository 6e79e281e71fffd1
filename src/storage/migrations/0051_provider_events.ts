import type { Kysely } from 'kysely';

/**
 * Status reports from providers (Twilio status callbacks, ...) about what they accepted. A
 * report may arrive before the worker has committed the provider's message id, so reports are
 * kept here and applied to the delivery as soon as both exist.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('provider_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('provider_message_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('code', 'text')
    .addColumn('internal', 'text')
    .addColumn('extra', 'text')
    .addColumn('applied_at', 'text')
    .execute();
  await db.schema.createIndex('provider_events_message').on('provider_events').columns(['channel', 'provider_message_id']).execute();
  await db.schema.createIndex('deliveries_provider_message').on('deliveries').columns(['channel', 'provider_message_id']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('deliveries_provider_message').ifExists().execute();
  await db.schema.dropTable('provider_events').ifExists().execute();
}

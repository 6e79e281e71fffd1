import type { Kysely } from 'kysely';

/**
 * Every transition the delivery ledger applies (modules/delivery), one row each, written in the
 * transaction that changed the state. Webhooks, broadcast metrics and live views read it by
 * environment, "id > last seen": ids come from delivery_event_counters, one row per environment
 * that a transaction increments just before it commits, so ids increase in commit order and a
 * reader never skips a row that commits later with a smaller id (as it could with a sequence).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('delivery_event_counters')
    .addColumn('env_id', 'text', (c) => c.primaryKey())
    .addColumn('last_id', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('delivery_events')
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('id', 'bigint', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('tracking_id', 'text', (c) => c.notNull())
    .addColumn('delivery_id', 'text')
    .addColumn('channel', 'text')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('from_state', 'text')
    .addColumn('to_state', 'text', (c) => c.notNull())
    .addColumn('code', 'text')
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('details', 'text')
    // Readers page by (env_id, id).
    .addPrimaryKeyConstraint('delivery_events_pk', ['env_id', 'id'])
    .execute();
  // The hourly purge removes events older than the log retention.
  await db.schema.createIndex('delivery_events_at').on('delivery_events').column('at').execute();
  // Provider reports go with the same retention (they were kept forever before).
  await db.schema.createIndex('provider_events_at').on('provider_events').column('at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('provider_events_at').ifExists().execute();
  await db.schema.dropTable('delivery_events').ifExists().execute();
  await db.schema.dropTable('delivery_event_counters').ifExists().execute();
}

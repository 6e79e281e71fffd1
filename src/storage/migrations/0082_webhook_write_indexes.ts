import { type Kysely, sql } from 'kysely';

/**
 * Fewer index writes per webhook delivery (bench webhooks: every index entry is one more b-tree
 * write per delivery or event, and these two were read by no query of the delivery path):
 * - webhook_deliveries (endpoint_id, created_at) was read only by recovery, which asks for an
 *   endpoint's failed deliveries since a time: it becomes partial on status = 'failed', so a
 *   delivery that succeeds never enters it (deleting an endpoint and failing its pending
 *   deliveries use the prefix of the (endpoint_id, event_id) index).
 * - webhook_events (env_id, source_id) was read by no query: one dispatcher per environment at
 *   a time (its cursor row is locked) is what keeps a ledger event from becoming two.
 * The indexes on webhook_attempts.at and webhook_events.created_at stay: the retention purge
 * compares them with the injected clock's time.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('webhook_deliveries_endpoint').ifExists().execute();
  await db.schema
    .createIndex('webhook_deliveries_failed')
    .on('webhook_deliveries')
    .columns(['endpoint_id', 'created_at'])
    .where(sql.ref('status'), '=', 'failed')
    .execute();
  await db.schema.dropIndex('webhook_events_source').ifExists().execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('webhook_events_source').on('webhook_events').columns(['env_id', 'source_id']).unique().execute();
  await db.schema.dropIndex('webhook_deliveries_failed').ifExists().execute();
  await db.schema.createIndex('webhook_deliveries_endpoint').on('webhook_deliveries').columns(['endpoint_id', 'created_at']).execute();
}

import { type Kysely, sql } from 'kysely';

/**
 * Webhooks (modules/webhooks). Endpoints belong to one environment. Events are made from the
 * ledger's delivery_events (read per environment past webhook_cursors.last_id, in commit order)
 * or written by their producer in its own transaction; each event becomes one delivery per
 * subscribed endpoint. A delivery is its own small queue row: `next_attempt_at` is when it is
 * due, and claiming it moves that time past the lease, so a worker that dies mid-request leaves
 * it due again once the lease runs out (nothing lost, the same event id sent again).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    // 'events': the pingram SDK's single endpoint (/webhooks/events), at most one per environment; null otherwise.
    .addColumn('slot', 'text')
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('secret_enc', 'text', (c) => c.notNull())
    .addColumn('previous_secret_enc', 'text')
    .addColumn('previous_secret_until', 'text')
    .addColumn('failing_since', 'text')
    .addColumn('disabled_at', 'text')
    .addColumn('disabled_reason', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_endpoints_env').on('webhook_endpoints').columns(['env_id', 'created_at']).execute();
  await db.schema.createIndex('webhook_endpoints_slot').on('webhook_endpoints').columns(['env_id', 'slot']).unique().execute();

  await db.schema
    .createTable('webhook_cursors')
    .addColumn('env_id', 'text', (c) => c.primaryKey())
    .addColumn('last_id', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('webhook_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('tracking_id', 'text')
    // The delivery_events id it was made from (null for events their producer wrote).
    .addColumn('source_id', 'bigint')
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_events_source').on('webhook_events').columns(['env_id', 'source_id']).unique().execute();
  await db.schema.createIndex('webhook_events_created').on('webhook_events').column('created_at').execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('endpoint_id', 'text', (c) => c.notNull().references('webhook_endpoints.id').onDelete('cascade'))
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    // pending (due at next_attempt_at) | succeeded | failed
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull())
    // Attempts since the schedule last started (a replay or recovery starts it again).
    .addColumn('round_attempts', 'integer', (c) => c.notNull())
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    // The claim holding it (fences a late result of a lease that ran out).
    .addColumn('lease', 'text')
    .addColumn('last_attempt_at', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_deliveries_pair').on('webhook_deliveries').columns(['endpoint_id', 'event_id']).unique().execute();
  // Only pending rows are claimed: a settled delivery leaves this index and is not re-inserted
  // (with (status, next_attempt_at) every success moved its entry, one more b-tree write each).
  await db.schema
    .createIndex('webhook_deliveries_due')
    .on('webhook_deliveries')
    .column('next_attempt_at')
    .where(sql.ref('status'), '=', 'pending')
    .execute();
  // Recovery reads an endpoint's deliveries since a time; status is not in it, so settling writes no entry here.
  await db.schema.createIndex('webhook_deliveries_endpoint').on('webhook_deliveries').columns(['endpoint_id', 'created_at']).execute();

  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('endpoint_id', 'text', (c) => c.notNull().references('webhook_endpoints.id').onDelete('cascade'))
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('success', 'integer', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('response', 'text')
    .addColumn('error', 'text')
    .addColumn('next_attempt_at', 'text')
    .addColumn('trigger', 'text', (c) => c.notNull())
    .execute();
  // Listed newest first by id (UUIDv7: time-ordered), per endpoint.
  await db.schema.createIndex('webhook_attempts_endpoint').on('webhook_attempts').columns(['endpoint_id', 'id']).execute();
  await db.schema.createIndex('webhook_attempts_at').on('webhook_attempts').column('at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['webhook_attempts', 'webhook_deliveries', 'webhook_events', 'webhook_cursors', 'webhook_endpoints']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}

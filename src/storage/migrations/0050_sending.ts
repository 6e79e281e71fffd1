import type { Kysely } from 'kysely';

/**
 * A send is a message; each channel it reaches is a delivery; each provider call is an attempt.
 * The spec's Log record is a view over the three (modules/logs/log-record.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('messages')
    .addColumn('tracking_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('user_email', 'text')
    .addColumn('user_number', 'text')
    .addColumn('template_id', 'text')
    .addColumn('sub_notification_id', 'text')
    // The accepted request body, re-read by the worker (and replaced by a schedule update).
    .addColumn('request', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('job_id', 'text')
    .addColumn('ip', 'text')
    .addColumn('agent', 'text')
    .addColumn('received_at', 'text', (c) => c.notNull())
    .addColumn('processed_at', 'text')
    .addColumn('scheduled_for', 'text')
    .addColumn('schedule_updated_at', 'text')
    .addColumn('schedule_updated_to', 'text')
    .addColumn('schedule_deleted_at', 'text')
    .addColumn('failed_at', 'text')
    .addColumn('failed_code', 'text')
    .addColumn('failed_internal', 'text')
    .execute();
  await db.schema.createIndex('messages_env_received').on('messages').columns(['env_id', 'received_at']).execute();
  await db.schema.createIndex('messages_account_received').on('messages').columns(['account_id', 'received_at']).execute();
  await db.schema.createIndex('messages_received').on('messages').column('received_at').execute();

  await db.schema
    .createTable('deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tracking_id', 'text', (c) => c.notNull().references('messages.tracking_id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    // Log form of the channel: email, inapp, sms, call, web_push, mobile_push, slack.
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('routing', 'text', (c) => c.notNull())
    .addColumn('routing_reason', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    // Rendered content the provider receives; kept so retries send exactly the same thing.
    .addColumn('content', 'text')
    .addColumn('preview', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('sent_at', 'text')
    .addColumn('delivered_at', 'text')
    .addColumn('failed_at', 'text')
    .addColumn('failed_code', 'text')
    .addColumn('failed_internal', 'text')
    .addColumn('provider_message_id', 'text')
    // Channel-specific log fields (e.g. email_sent_message_id, email_failed_recipient).
    .addColumn('extra', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('deliveries_message_channel', ['tracking_id', 'channel'])
    .execute();

  await db.schema
    .createTable('delivery_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull().references('deliveries.id').onDelete('cascade'))
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('provider_code', 'text')
    .addColumn('detail', 'text')
    .execute();
  await db.schema.createIndex('delivery_attempts_delivery').on('delivery_attempts').columns(['delivery_id', 'attempt']).execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('tracking_id', 'text', (c) => c.notNull())
    .addColumn('response', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['env_id', 'key'])
    .execute();

  await db.schema
    .createTable('usage_counters')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('cycle_start', 'text', (c) => c.notNull())
    .addColumn('messages', 'integer', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('usage_counters_pk', ['account_id', 'cycle_start'])
    .execute();

  await db.schema
    .createTable('log_queries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text')
    .addColumn('filters', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('result', 'text')
    .addColumn('error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('completed_at', 'text')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const t of ['log_queries', 'usage_counters', 'idempotency_keys', 'delivery_attempts', 'deliveries', 'messages']) {
    await db.schema.dropTable(t).ifExists().execute();
  }
}

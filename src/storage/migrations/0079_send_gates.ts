import type { Kysely } from 'kysely';

/**
 * Deduplication and throttling of sends (issue 13, item 5; modules/sending/send-gates.ts).
 *
 * - `dedup_keys`: who holds a content fingerprint (type, user, content) in an environment, until
 *   when. A send claims it with one INSERT ... ON CONFLICT DO UPDATE that takes the row only when
 *   the holder's window has ended, so concurrent claims (also from other processes) agree.
 * - `throttle_counters`: one fixed-window counter per throttling scope (type, and the user when
 *   the scope names one, and the window's length), counted by one atomic upsert per batch.
 * Both are purged once their window has ended (indexes on the end).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('dedup_keys')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    // sha256 of (type, user, content), hex.
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    // The send that holds the window: the one delivered.
    .addColumn('tracking_id', 'text', (c) => c.notNull())
    .addColumn('claimed_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('dedup_keys_pk', ['env_id', 'fingerprint'])
    .execute();
  await db.schema.createIndex('dedup_keys_expires').on('dedup_keys').column('expires_at').execute();

  await db.schema
    .createTable('throttle_counters')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    // JSON [notificationId, userId or null, window]: see send-gates.ts throttleKey.
    .addColumn('counter_key', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    // End of the current window; FOREVER_END for a throttle that never resets.
    .addColumn('window_ends_at', 'text', (c) => c.notNull())
    // Sends counted in the window, throttled ones included (only "count <= max" matters).
    .addColumn('count', 'integer', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('throttle_counters_pk', ['env_id', 'counter_key'])
    .execute();
  await db.schema.createIndex('throttle_counters_window').on('throttle_counters').column('window_ends_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('throttle_counters').execute();
  await db.schema.dropTable('dedup_keys').execute();
}

import { type Kysely, PostgresAdapter, sql } from 'kysely';

/**
 * Request rate limits (issue 14, item 3; src/http/rate-limit.ts): one fixed-window counter per
 * bucket (`ip:<address>` or `key:<API key id>`), counted by one atomic upsert, so that every
 * process on one PostgreSQL database shares the counts. SQLite (one process) counts in memory and
 * leaves this table empty; it exists there too so both engines have one schema.
 *
 * On PostgreSQL the table is UNLOGGED: a counter is written on every request, and losing the
 * counts of the current window in a crash (the table is emptied on recovery) costs nothing
 * worth a WAL record per request. No index on window_ends_at: an update then changes no indexed
 * column (a HOT update, no index write per request); the hourly purge reads the small table whole.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('rate_limit_counters')
    .$call((table) => (postgres ? table.modifyFront(sql`unlogged`) : table))
    .addColumn('bucket', 'text', (c) => c.primaryKey())
    // End of the bucket's current window (ISO-8601 UTC, as every timestamp of the schema).
    .addColumn('window_ends_at', 'text', (c) => c.notNull())
    // Requests counted in the window, refused ones included (only "count <= max" matters).
    .addColumn('count', 'integer', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('rate_limit_counters').execute();
}

import type { Kysely } from 'kysely';

/**
 * The logs a finished log query found, one row each in result order, so GET /logs/query/{id}
 * reads one page of stored rows instead of parsing (and sending) the whole result every time.
 * Rows go with their query (the hourly purge). Queries finished before this migration keep
 * their result in log_queries.result.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('log_query_results')
    .addColumn('query_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('log', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('log_query_results_pk', ['query_id', 'position'])
    .execute();
  // The purge finds old queries by creation time.
  await db.schema.createIndex('log_queries_created').on('log_queries').column('created_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('log_queries_created').ifExists().execute();
  await db.schema.dropTable('log_query_results').ifExists().execute();
}

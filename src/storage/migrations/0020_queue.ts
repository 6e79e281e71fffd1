import { type Kysely, SqliteAdapter } from 'kysely';

/**
 * The embedded job queue (src/queue/sqlite-queue.ts). SQLite only: on PostgreSQL the queue is
 * pg-boss, which installs and migrates its own schema.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
  await db.schema
    .createTable('queue_jobs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    // waiting | running | done | failed | cancelled
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('run_at', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull())
    .addColumn('locked_by', 'text')
    .addColumn('locked_until', 'text')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  // Claim: due waiting jobs of a name in run_at order, and expired locks of running ones.
  await db.schema.createIndex('queue_jobs_claim').on('queue_jobs').columns(['name', 'state', 'run_at']).execute();
  // Purge of old finished jobs.
  await db.schema.createIndex('queue_jobs_purge').on('queue_jobs').columns(['state', 'updated_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
  await db.schema.dropTable('queue_jobs').ifExists().execute();
}

import { type Kysely, SqliteAdapter } from 'kysely';

/**
 * Sends accepted on SQLite and not yet ingested into `messages` (see messages.journal.ts): one row per
 * chunk of up to 16 sends of a group commit, their message rows as a JSON array, each row with
 * one `sends.ingest` job committed beside it. SQLite only: on PostgreSQL the intake writes the
 * message rows directly.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
  await db.schema
    .createTable('send_intake')
    // The rowid: chunks are appended in acceptance order.
    .addColumn('seq', 'integer', (c) => c.primaryKey())
    .addColumn('messages', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
  await db.schema.dropTable('send_intake').ifExists().execute();
}

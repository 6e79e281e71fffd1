import { type Kysely, SqliteAdapter } from 'kysely';

/**
 * Indexes every accepted send paid for and nothing needed (measured, issue 3): each one is one
 * more B-tree write per message or per job state change.
 * - messages (env_id, received_at): log queries always filter by account, which has its own
 *   (account_id, received_at) index; a lookup by id uses the primary key.
 * - queue_jobs (state, updated_at): only the purge read it, and it moved on every claim and
 *   completion. The purge now walks the claim index (name, state, run_at) instead.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('messages_env_received').ifExists().execute();
  if (db.getExecutor().adapter instanceof SqliteAdapter) await db.schema.dropIndex('queue_jobs_purge').ifExists().execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('messages_env_received').ifNotExists().on('messages').columns(['env_id', 'received_at']).execute();
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    await db.schema.createIndex('queue_jobs_purge').ifNotExists().on('queue_jobs').columns(['state', 'updated_at']).execute();
  }
}

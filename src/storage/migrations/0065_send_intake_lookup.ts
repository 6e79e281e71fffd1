import { type Kysely, SqliteAdapter } from 'kysely';

/**
 * Lookups in the SQLite intake journal without reading its chunks. Each chunk records the
 * lowest and highest tracking id it holds (ids are UUIDv7, so they sort by time and a chunk's
 * range is narrow), and both lookups go through covering indexes:
 * - a send by tracking id (GET /logs/{ids}, the scheduler routes): the chunks whose range holds it;
 * - whether chunks accepted in a time range are pending (log queries): by created_at.
 * Before, both scanned every pending chunk, reading its JSON through the overflow pages: with a
 * backlog of 300,000 sends (~100 MB), tens of milliseconds of the event loop per lookup.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
  // Null for chunks written before this migration; lookups still read those.
  await db.schema.alterTable('send_intake').addColumn('first_id', 'text').execute();
  await db.schema.alterTable('send_intake').addColumn('last_id', 'text').execute();
  await db.schema.createIndex('send_intake_id_range').on('send_intake').columns(['last_id', 'first_id']).execute();
  await db.schema.createIndex('send_intake_created').on('send_intake').column('created_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return;
  await db.schema.dropIndex('send_intake_created').ifExists().execute();
  await db.schema.dropIndex('send_intake_id_range').ifExists().execute();
  await db.schema.alterTable('send_intake').dropColumn('last_id').execute();
  await db.schema.alterTable('send_intake').dropColumn('first_id').execute();
}

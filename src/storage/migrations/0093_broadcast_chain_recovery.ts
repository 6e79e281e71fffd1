import { type Kysely, sql } from 'kysely';

/**
 * Recovery of a broadcast's delivery chain that ended or stalled (issue 15, item 4;
 * docs/broadcasts.md "Crashes").
 * - `broadcasts.send_step_at`: when the chain that owns delivery (`send_token`) last ran a step
 *   (written when the chain is started, with each page, and at least every few seconds between).
 * - `broadcasts.send_restarts`: chains the recovery sweep started since delivery last handed a
 *   page over; each one doubles how long the next chain may go without a step before it too is
 *   replaced (backoff).
 * - `broadcasts_sending_step`: the sweep's read of quiet sending broadcasts, across accounts.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('broadcasts').addColumn('send_step_at', 'text').execute();
  await db.schema.alterTable('broadcasts').addColumn('send_restarts', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await sql`create index broadcasts_sending_step on broadcasts (send_step_at) where status = 'sending'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists broadcasts_sending_step`.execute(db);
  await db.schema.alterTable('broadcasts').dropColumn('send_restarts').execute();
  await db.schema.alterTable('broadcasts').dropColumn('send_step_at').execute();
}

import type { Kysely } from 'kysely';

/**
 * Delivery of email broadcasts (issue 15, items 4 and 5; docs/broadcasts.md "Delivery").
 * - `broadcasts.send_cursor`: the last recipient `seq` handed over to the intake (pending
 *   recipients above it are still to send); moved in the transaction that hands a page over, as
 *   the guard of that page. `send_token`: the delivery job chain that owns the broadcast now
 *   (a chain whose token is not this one stops: a resume starts a new chain).
 * - `broadcast_recipients.due_at`: when the recipient's message is due (its slot of the account's
 *   rate); null until handed over.
 * - `broadcast_pacing`: per account, the first free slot of its broadcast rate
 *   (CLARION_BROADCAST_RATE): every hand-over of any broadcast of the account takes its slots
 *   from here, with a conditional update.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('broadcasts').addColumn('send_cursor', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('broadcasts').addColumn('send_token', 'text').execute();
  await db.schema.alterTable('broadcast_recipients').addColumn('due_at', 'text').execute();
  await db.schema
    .createTable('broadcast_pacing')
    .addColumn('account_id', 'text', (c) => c.primaryKey())
    .addColumn('next_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('broadcast_pacing').execute();
  await db.schema.alterTable('broadcast_recipients').dropColumn('due_at').execute();
  await db.schema.alterTable('broadcasts').dropColumn('send_token').execute();
  await db.schema.alterTable('broadcasts').dropColumn('send_cursor').execute();
}

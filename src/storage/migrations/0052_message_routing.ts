import type { Kysely } from 'kysely';

/**
 * Channels a message did not use are recorded on the message itself ({channel: reason}) rather
 * than as one delivery row each: most sends skip most channels, and those rows were the bulk of
 * the writes per message.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('skipped', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').dropColumn('skipped').execute();
}

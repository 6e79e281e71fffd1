import type { Kysely } from 'kysely';

/**
 * What a log query by user (userFilter, the SDK's usual query) needs on a grown store: it walked
 * the account's whole (account_id, received_at) range newest first, reading every message in it
 * to keep one user's, up to a second on SQLite with 1,000,000 messages for a user whose sends
 * were weeks old (bench, "cost as the work grows"). With the user in the index it reads that
 * user's rows only. (The deliveries of the messages found are read through the
 * (tracking_id, channel) unique index.) It is one more B-tree write per message; the bench
 * measures acceptance on the grown store against the empty one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('messages_account_user_received').ifNotExists().on('messages').columns(['account_id', 'user_id', 'received_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('messages_account_user_received').ifExists().execute();
}

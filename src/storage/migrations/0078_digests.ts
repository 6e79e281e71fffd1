import { type Kysely, sql } from 'kysely';

/**
 * Digests (issue 13, item 3). `digests`: one row per digest of a user's messages of one type on
 * one channel, `open` while it collects and due at `due_at`; at most one open digest per (env,
 * user, type, channel), which the partial unique index enforces under concurrent routing. Once
 * claimed it is `sent` with the trackingId of the message that carries it (or `empty`/`failed`).
 * `digest_items`: the deliveries collected into a digest (their status is `digested`); removed
 * with the delivery when the log retention purges it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('digests')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('notification_id', 'text', (c) => c.notNull())
    // The log form of the channel (email, sms, ...).
    .addColumn('channel', 'text', (c) => c.notNull())
    // hourly | daily | weekly | monthly
    .addColumn('option', 'text', (c) => c.notNull())
    // The IANA zone the due time was computed in.
    .addColumn('timezone', 'text', (c) => c.notNull())
    // open | sent | empty | failed
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('due_at', 'text', (c) => c.notNull())
    .addColumn('tracking_id', 'text')
    .addColumn('item_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failed_code', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('sent_at', 'text')
    .execute();
  await sql`create unique index digests_open on digests (env_id, user_id, notification_id, channel) where state = 'open'`.execute(db);
  await sql`create index digests_due on digests (due_at) where state = 'open'`.execute(db);
  await db.schema.createIndex('digests_tracking').on('digests').column('tracking_id').execute();

  await db.schema
    .createTable('digest_items')
    .addColumn('digest_id', 'text', (c) => c.notNull().references('digests.id').onDelete('cascade'))
    .addColumn('delivery_id', 'text', (c) => c.notNull().references('deliveries.id').onDelete('cascade'))
    .addColumn('tracking_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('digest_items_pk', ['digest_id', 'delivery_id'])
    .execute();
  await db.schema.createIndex('digest_items_delivery').on('digest_items').column('delivery_id').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('digest_items').execute();
  await db.schema.dropTable('digests').execute();
}

import { type Kysely, sql } from 'kysely';

/**
 * Email broadcasts (issue 15).
 * - `broadcasts`: one row per broadcast of an environment, its status (broadcast-states.ts), its
 *   content and audience (JSON: {filter} or {emails}), and how far its audience is frozen:
 *   `freeze_cursor` is the last user id (filter) or list index (emails) read into recipients,
 *   `frozen_count` the recipient rows written so far (the next `seq`), `audience_frozen_at` set
 *   once every row is written. Listed newest first by id (a UUIDv7); started at `schedule_at` by
 *   the due sweep (partial index on scheduled rows).
 * - `broadcast_transitions`: every applied operation with its time and actor.
 * - `broadcast_recipients`: the frozen audience, one row per user, numbered by `seq` in the order
 *   it was frozen, so delivery and GET .../recipients read it in keyset pages ((broadcast_id,
 *   state, seq) serves a state's pages and the pending ones to send next). A recipient's state
 *   and the times it reached each step (sent, delivered, opened, ...) feed the metrics; its
 *   trackingId ties it to the message delivery makes for it (indexed, for provider events).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('broadcasts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('paused_reason', 'text')
    .addColumn('notification_id', 'text')
    .addColumn('audience', 'text', (c) => c.notNull())
    .addColumn('from_name', 'text', (c) => c.notNull())
    .addColumn('from_address', 'text', (c) => c.notNull())
    .addColumn('reply_to_address', 'text')
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('html', 'text', (c) => c.notNull())
    .addColumn('internal_template', 'text')
    .addColumn('schedule_at', 'text')
    .addColumn('archived_at', 'text')
    .addColumn('freeze_cursor', 'text')
    .addColumn('frozen_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('audience_frozen_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('broadcasts_env').on('broadcasts').columns(['env_id', 'id']).execute();
  await sql`create index broadcasts_due on broadcasts (schedule_at) where status = 'scheduled'`.execute(db);

  await db.schema
    .createTable('broadcast_transitions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('broadcast_id', 'text', (c) => c.notNull().references('broadcasts.id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('operation', 'text', (c) => c.notNull())
    .addColumn('from_status', 'text', (c) => c.notNull())
    .addColumn('to_status', 'text', (c) => c.notNull())
    .addColumn('paused_reason', 'text')
    // `system`, or the caller: apiKey:<keyId>, basic:<clientId>, jwt:<subject>.
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('broadcast_transitions_broadcast').on('broadcast_transitions').columns(['broadcast_id', 'id']).execute();

  await db.schema
    .createTable('broadcast_recipients')
    .addColumn('broadcast_id', 'text', (c) => c.notNull().references('broadcasts.id').onDelete('cascade'))
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('email', 'text')
    // pending | sent | delivered | failed | bounced | opened | clicked | unsubscribed | skipped
    .addColumn('state', 'text', (c) => c.notNull())
    // Why a recipient is skipped: NO_EMAIL, SUPPRESSED, BOUNCED, UNSUBSCRIBED, CANCELED.
    .addColumn('skip_reason', 'text')
    .addColumn('tracking_id', 'text')
    .addColumn('sent_at', 'text')
    .addColumn('delivered_at', 'text')
    .addColumn('failed_at', 'text')
    .addColumn('bounced_at', 'text')
    .addColumn('opened_at', 'text')
    .addColumn('clicked_at', 'text')
    .addColumn('unsubscribed_at', 'text')
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('broadcast_recipients_pk', ['broadcast_id', 'seq'])
    .execute();
  await db.schema.createIndex('broadcast_recipients_user').on('broadcast_recipients').columns(['broadcast_id', 'user_id']).unique().execute();
  await db.schema.createIndex('broadcast_recipients_state').on('broadcast_recipients').columns(['broadcast_id', 'state', 'seq']).execute();
  await sql`create index broadcast_recipients_tracking on broadcast_recipients (tracking_id) where tracking_id is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('broadcast_recipients').execute();
  await db.schema.dropTable('broadcast_transitions').execute();
  await db.schema.dropTable('broadcasts').execute();
}

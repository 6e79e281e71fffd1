import type { Kysely } from 'kysely';

// The local outbox (mail kept instead of sent when no SMTP server is configured) and the
// per-environment SMTP setting. A delivery's Message-ID is unique per environment, so a retried
// delivery stores nothing twice.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('outbox_messages')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('tracking_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text')
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('from_address', 'text', (c) => c.notNull())
    .addColumn('from_name', 'text')
    .addColumn('to_address', 'text', (c) => c.notNull())
    .addColumn('to_address_lc', 'text', (c) => c.notNull())
    .addColumn('to_name', 'text')
    .addColumn('cc', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('bcc', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('reply_to', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('preview_text', 'text')
    .addColumn('html', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('headers', 'text', (c) => c.notNull())
    .addColumn('attachments', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('raw', 'text', (c) => c.notNull())
    .addColumn('size', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('outbox_messages_message_id', ['account_id', 'env_id', 'message_id'])
    .execute();
  await db.schema.createIndex('outbox_env_created').on('outbox_messages').columns(['account_id', 'env_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('outbox_env_to').on('outbox_messages').columns(['account_id', 'env_id', 'to_address_lc', 'created_at']).execute();
  await db.schema.createIndex('outbox_env_tracking').on('outbox_messages').columns(['account_id', 'env_id', 'tracking_id']).execute();

  await db.schema
    .createTable('email_settings')
    .addColumn('env_id', 'text', (c) => c.primaryKey().references('environments.client_id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('smtp_url_enc', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('email_settings').ifExists().execute();
  await db.schema.dropTable('outbox_messages').ifExists().execute();
}

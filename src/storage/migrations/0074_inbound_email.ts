import type { Kysely } from 'kysely';

/**
 * Inbound email (modules/addresses). `email_addresses`: the receiving addresses of an
 * environment; `full_address` (lower case) is the key, since the SMTP server finds the account
 * and environment of a mail by its recipient alone. `inbound_emails`: every accepted message,
 * per recipient address, replies and new mail alike (a reply is also merged into the log of the
 * outbound delivery it answers, through the ledger).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('email_addresses')
    .addColumn('full_address', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('domain', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull()) // builtin | custom
    .addColumn('display_name', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('email_addresses_env').on('email_addresses').columns(['account_id', 'env_id', 'created_at']).execute();

  await db.schema
    .createTable('inbound_emails')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    // The outbound message and delivery it replies to; null for new mail.
    .addColumn('tracking_id', 'text')
    .addColumn('delivery_id', 'text')
    .addColumn('message_id', 'text')
    // JSON: the email_inbound_* fields (as in the log record) and the attachments' metadata.
    .addColumn('fields', 'text', (c) => c.notNull())
    .addColumn('received_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('inbound_emails_env').on('inbound_emails').columns(['env_id', 'received_at', 'id']).execute();
  await db.schema.createIndex('inbound_emails_tracking').on('inbound_emails').column('tracking_id').execute();
  await db.schema.createIndex('inbound_emails_received').on('inbound_emails').column('received_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('inbound_emails').ifExists().execute();
  await db.schema.dropTable('email_addresses').ifExists().execute();
}

import type { Kysely } from 'kysely';

/**
 * Telephony: the numbers each account owns (a number belongs to one account, so an inbound
 * message finds its account), the SMS sends an inbound reply is matched to (last send from a
 * number to a user, with its auto-reply), and what the local development carrier was given.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('phone_numbers')
    .addColumn('phone_number', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('label', 'text')
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('is_default', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('phone_numbers_account').on('phone_numbers').columns(['account_id', 'created_at']).execute();

  await db.schema
    .createTable('sms_sends')
    .addColumn('delivery_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('env_id', 'text', (c) => c.notNull())
    .addColumn('tracking_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('to_number', 'text', (c) => c.notNull())
    .addColumn('from_number', 'text', (c) => c.notNull())
    .addColumn('provider_message_id', 'text', (c) => c.notNull())
    .addColumn('auto_reply', 'text')
    .addColumn('replied_at', 'text')
    .addColumn('reply_message_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('sms_sends_conversation').on('sms_sends').columns(['to_number', 'from_number', 'created_at']).execute();

  await db.schema
    .createTable('dev_carrier_messages')
    .addColumn('sid', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull()) // sms | call
    .addColumn('direction', 'text', (c) => c.notNull()) // outbound | inbound
    .addColumn('account_id', 'text') // set for inbound messages a developer simulated
    .addColumn('env_id', 'text')
    .addColumn('from_number', 'text', (c) => c.notNull())
    .addColumn('to_number', 'text', (c) => c.notNull())
    .addColumn('body', 'text')
    .addColumn('media_urls', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('twiml', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('status_callback', 'text')
    .addColumn('segments', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('duration', 'integer')
    .addColumn('price', 'text')
    .addColumn('error_code', 'integer')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('dev_carrier_created').on('dev_carrier_messages').columns(['kind', 'created_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('dev_carrier_messages').ifExists().execute();
  await db.schema.dropTable('sms_sends').ifExists().execute();
  await db.schema.dropTable('phone_numbers').ifExists().execute();
}

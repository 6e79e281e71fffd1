import type { Kysely } from 'kysely';

// Portable column types only (see storage/schema.ts): text, integer, double precision.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('accounts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('account_type', 'text', (c) => c.notNull())
    .addColumn('creator', 'text')
    .addColumn('messages_cap', 'integer', (c) => c.notNull())
    .addColumn('cost_cap', 'double precision', (c) => c.notNull())
    .addColumn('sms_cap', 'integer')
    .addColumn('call_cap', 'integer')
    .addColumn('billing_version', 'integer', (c) => c.notNull())
    .addColumn('anniversary_date', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('subscription_status', 'text')
    .addColumn('auto_upgrade', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('environments')
    .addColumn('client_id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('client_secret_enc', 'text', (c) => c.notNull())
    .addColumn('disable_sending', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('secure_mode', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('environments_account').on('environments').columns(['account_id', 'created_at']).execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('key_type', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('display', 'text', (c) => c.notNull())
    .addColumn('revoked', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .execute();
  await db.schema.createIndex('api_keys_account').on('api_keys').columns(['account_id', 'created_at']).execute();

  const users = db.schema
    .createTable('users')
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('email', 'text')
    .addColumn('number', 'text')
    .addColumn('push_tokens', 'text')
    .addColumn('web_push_tokens', 'text')
    .addColumn('timezone', 'text')
    .addColumn('slack_channel', 'text')
    .addColumn('slack_token', 'text')
    .addColumn('properties', 'text')
    .addColumn('suppressions', 'text')
    .addColumn('last_seen_time', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull());
  await users.addPrimaryKeyConstraint('users_pk', ['env_id', 'id']).execute();
  // Newest-first listing pages on (created_at, id).
  await db.schema.createIndex('users_env_created').on('users').columns(['env_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('users_env_email').on('users').columns(['env_id', 'email']).execute();
  await db.schema.createIndex('users_env_number').on('users').columns(['env_id', 'number']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['users', 'api_keys', 'environments', 'accounts']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}

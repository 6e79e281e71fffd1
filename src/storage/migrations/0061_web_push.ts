import type { Kysely } from 'kysely';

// One VAPID key pair per environment, generated on first need. The private key is sealed with
// the server secret (deps.secrets); the public key is what browsers subscribe with.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('web_push_settings')
    .addColumn('env_id', 'text', (c) => c.primaryKey().references('environments.client_id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('private_key_enc', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('web_push_settings').ifExists().execute();
}

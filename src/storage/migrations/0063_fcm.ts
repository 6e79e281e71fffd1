import type { Kysely } from 'kysely';

// FCM credentials per environment (PUT /settings/push/fcm): the service account's public fields
// as JSON, and its private key encrypted with the server key (src/secrets.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('fcm_settings')
    .addColumn('env_id', 'text', (c) => c.primaryKey().references('environments.client_id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('project_id', 'text', (c) => c.notNull())
    .addColumn('client_email', 'text', (c) => c.notNull())
    .addColumn('token_uri', 'text', (c) => c.notNull())
    /** The uploaded service-account JSON without `private_key`. */
    .addColumn('account_json', 'text', (c) => c.notNull())
    .addColumn('private_key_enc', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('fcm_settings').ifExists().execute();
}

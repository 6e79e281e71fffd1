import type { Kysely } from 'kysely';

// APNs credentials per environment (PUT /settings/push/apn). The .p8 signing key is stored
// encrypted with the server secret; key id, team id and topic are not secret.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('apn_settings')
    .addColumn('env_id', 'text', (c) => c.primaryKey().references('environments.client_id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('team_id', 'text', (c) => c.notNull())
    .addColumn('topic', 'text', (c) => c.notNull())
    .addColumn('key_enc', 'text', (c) => c.notNull())
    .addColumn('key_hint', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('apn_settings').ifExists().execute();
}

import type { Kysely } from 'kysely';

// The per-environment Slack bot token: used for users whose slackToken carries no token of its
// own. Encrypted at rest (Secrets), one row per environment.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('slack_settings')
    .addColumn('env_id', 'text', (c) => c.primaryKey().references('environments.client_id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('bot_token_enc', 'text', (c) => c.notNull())
    .addColumn('team_id', 'text')
    .addColumn('team_name', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('slack_settings').ifExists().execute();
}

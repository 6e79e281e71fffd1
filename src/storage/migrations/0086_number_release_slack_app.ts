import type { Kysely } from 'kysely';

/**
 * Two additions of the pingram SDK's NumbersApi and Slack OAuth (issue 14):
 * - `phone_numbers.released_at`: a released number stays the account's (listed as released, and
 *   reactivated by ordering it again) but no longer sends; null while active.
 * - `slack_apps`: the Slack app an environment's users install with OAuth v2 (client id, and its
 *   client secret encrypted at rest with Secrets), one row per environment.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('phone_numbers').addColumn('released_at', 'text').execute();
  await db.schema
    .createTable('slack_apps')
    .addColumn('env_id', 'text', (c) => c.primaryKey().references('environments.client_id').onDelete('cascade'))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('client_secret_enc', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('slack_apps').ifExists().execute();
  await db.schema.alterTable('phone_numbers').dropColumn('released_at').execute();
}

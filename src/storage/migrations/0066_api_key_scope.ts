import type { Kysely } from 'kysely';

/**
 * API keys get a scope: `account` (manages every environment of the account, its keys and
 * settings) or `environment` (acts only inside its own environment). Keys made before scopes
 * existed: the bootstrap key of each account (named "bootstrap" by `clarion init` and the first
 * start) becomes account scope, as the key a team starts with; every other key was created for
 * one environment and becomes environment scope.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('api_keys').addColumn('scope', 'text', (c) => c.notNull().defaultTo('environment')).execute();
  // The columns this step reads, as they are at this step (a migration never follows the current schema types).
  await db
    .withTables<{ api_keys: { name: string; scope: string } }>()
    .updateTable('api_keys').set({ scope: 'account' }).where('name', '=', 'bootstrap').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('scope').execute();
}

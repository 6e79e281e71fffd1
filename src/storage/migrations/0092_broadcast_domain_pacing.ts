import { type Kysely, sql } from 'kysely';

/**
 * A rate per sender domain for email broadcasts, and fairness between one account's broadcasts
 * (issue 15, item 4; docs/broadcasts.md "Rate").
 * - `broadcast_domain_pacing`: per account and sender domain (the domain of `fromAddress`, the
 *   name that is its key within the account), the first free slot of the domain's rate
 *   (CLARION_BROADCAST_DOMAIN_RATE); a page takes its slots here and from `broadcast_pacing` in
 *   one transaction, each with a conditional update.
 * - `broadcasts_sending_account`: the account's sending broadcasts, counted before each page for
 *   its fair share of the rate.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('broadcast_domain_pacing')
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('domain', 'text', (c) => c.notNull())
    .addColumn('next_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('broadcast_domain_pacing_pk', ['account_id', 'domain'])
    .execute();
  await sql`create index broadcasts_sending_account on broadcasts (account_id) where status = 'sending'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index if exists broadcasts_sending_account`.execute(db);
  await db.schema.dropTable('broadcast_domain_pacing').execute();
}

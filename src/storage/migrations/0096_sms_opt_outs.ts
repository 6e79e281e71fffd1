import type { Kysely } from 'kysely';

/**
 * SMS opt-outs kept on the number, per environment: a STOP texted from a number (to any of the
 * account's numbers, or the shared one) stops SMS to that number in the environment of the last
 * send to it, whichever user record carries the number now or later; START removes the row.
 * `to_number` is the number the STOP was texted to. The primary key serves planning's lookup
 * (account, environment, the batch's numbers).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sms_opt_outs')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('env_id', 'text', (c) => c.notNull().references('environments.client_id').onDelete('cascade'))
    .addColumn('phone_number', 'text', (c) => c.notNull())
    .addColumn('keyword', 'text', (c) => c.notNull())
    .addColumn('to_number', 'text', (c) => c.notNull())
    .addColumn('message_sid', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sms_opt_outs_pk', ['account_id', 'env_id', 'phone_number'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('sms_opt_outs').ifExists().execute();
}

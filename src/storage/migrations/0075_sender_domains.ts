import type { Kysely } from 'kysely';

/**
 * Sender domains (modules/domains). A domain belongs to an account (every environment of the
 * account sends from it), keyed by (account, domain): two accounts may claim the same name, and
 * each is verified only by the records of its own selector and token. The DKIM private key is
 * sealed with the server's secret key (Secrets.encrypt); the public key is kept in clear to answer
 * the DKIM record. `next_check_at` drives the periodic verification job.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('sender_domains')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('domain', 'text', (c) => c.notNull())
    .addColumn('selector', 'text', (c) => c.notNull())
    // base64 DER SubjectPublicKeyInfo: the p= of the DKIM record.
    .addColumn('dkim_public_key', 'text', (c) => c.notNull())
    .addColumn('dkim_private_key_enc', 'text', (c) => c.notNull())
    .addColumn('verification_token', 'text', (c) => c.notNull())
    // NOT_STARTED | PENDING | SUCCESS | FAILED | TEMPORARY_FAILURE
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('mail_from_status', 'text', (c) => c.notNull())
    // JSON: per record, found | missing | error, from the last check.
    .addColumn('record_status', 'text', (c) => c.notNull())
    // Set by a successful check, cleared when the records are gone; mail may use the domain while set.
    .addColumn('verified_at', 'text')
    .addColumn('last_sync', 'text', (c) => c.notNull())
    .addColumn('next_check_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sender_domains_pk', ['account_id', 'domain'])
    .execute();
  await db.schema.createIndex('sender_domains_due').on('sender_domains').column('next_check_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('sender_domains').ifExists().execute();
}

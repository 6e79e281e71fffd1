import { type Kysely, PostgresAdapter } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { DomainTables, SenderDomainRow, SenderDomainsTable } from './domains.tables.js';

/** What a check writes back. */
export type DomainCheckPatch = Pick<SenderDomainsTable, 'status' | 'mail_from_status' | 'record_status' | 'verified_at' | 'last_sync' | 'next_check_at' | 'updated_at'>;

/** The SQL of sender domains; every read and write is scoped by account, except the due list of the periodic job. */
export class DomainsRepository {
  private readonly db: Kysely<CoreTables & DomainTables>;

  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<DomainTables>();
  }

  list(accountId: string): Promise<SenderDomainRow[]> {
    return this.db.selectFrom('sender_domains').selectAll().where('account_id', '=', accountId).orderBy('created_at').orderBy('domain').execute();
  }

  find(accountId: string, domain: string): Promise<SenderDomainRow | undefined> {
    return this.db.selectFrom('sender_domains').selectAll().where('account_id', '=', accountId).where('domain', '=', domain).executeTakeFirst();
  }

  /**
   * Inserts the domain unless the account already has `max`: the count and the insert in one
   * transaction, with the account's row locked on PostgreSQL (SQLite serializes writers), so
   * concurrent adds cannot pass the limit together. False when at the limit.
   */
  async insertUnderLimit(row: SenderDomainsTable, max: number): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      if (trx.getExecutor().adapter instanceof PostgresAdapter) {
        await trx.selectFrom('accounts').select('id').where('id', '=', row.account_id).forUpdate().execute();
      }
      const { n } = await trx.selectFrom('sender_domains').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', row.account_id).executeTakeFirstOrThrow();
      if (Number(n) >= max) return false;
      await trx.insertInto('sender_domains').values(row).execute();
      return true;
    });
  }

  async insert(row: SenderDomainsTable): Promise<void> {
    await this.db.insertInto('sender_domains').values(row).execute();
  }

  async delete(accountId: string, domain: string): Promise<boolean> {
    const res = await this.db.deleteFrom('sender_domains').where('account_id', '=', accountId).where('domain', '=', domain).executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  /** Records a check; false when the domain was deleted meanwhile. */
  async recordCheck(accountId: string, domain: string, patch: DomainCheckPatch): Promise<boolean> {
    const res = await this.db.updateTable('sender_domains').set(patch).where('account_id', '=', accountId).where('domain', '=', domain).executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Domains whose next check is due, oldest due first (the periodic job, across accounts). */
  due(now: string, limit: number): Promise<SenderDomainRow[]> {
    return this.db.selectFrom('sender_domains').selectAll().where('next_check_at', '<=', now).orderBy('next_check_at').limit(limit).execute();
  }

  /** The account's domains that mail may be sent from (verified, or verified and now unreachable), with their keys. */
  sendable(accountId: string): Promise<Pick<SenderDomainRow, 'domain' | 'selector' | 'dkim_private_key_enc' | 'record_status'>[]> {
    return this.db
      .selectFrom('sender_domains')
      .select(['domain', 'selector', 'dkim_private_key_enc', 'record_status'])
      .where('account_id', '=', accountId)
      .where('verified_at', 'is not', null)
      .execute();
  }
}

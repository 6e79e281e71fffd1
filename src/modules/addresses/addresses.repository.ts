import type { Kysely } from 'kysely';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import type { AddressesDb, AddressTables, EmailAddressRow, EmailAddressesTable, InboundEmailRow, InboundEmailsTable } from './addresses.tables.js';
import type { SendingTables } from '../sending/sending.tables.js';

/** The outbound email delivery a reply answers, with what its event needs. */
export interface RepliedDelivery {
  id: string;
  tracking_id: string;
  provider_message_id: string | null;
  user_id: string;
  notification_id: string;
}

/**
 * The SQL of inbound addresses and inbound mail. Every read and write of an environment's data is
 * scoped by account and environment; `findAddress` is the one global lookup (the SMTP server has
 * only the recipient), and it answers the owner with the row.
 */
export class AddressesRepository {
  private readonly db: AddressesDb;

  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<AddressTables & SendingTables>();
  }

  /** A repository over the caller's transaction. */
  static over(trx: Kysely<CoreTables>): AddressesRepository {
    return new AddressesRepository(trx);
  }

  list(scope: EnvScope): Promise<EmailAddressRow[]> {
    return this.db
      .selectFrom('email_addresses')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .orderBy('created_at')
      .orderBy('full_address')
      .execute();
  }

  find(scope: EnvScope, fullAddress: string): Promise<EmailAddressRow | undefined> {
    return this.db
      .selectFrom('email_addresses')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('full_address', '=', fullAddress)
      .executeTakeFirst();
  }

  /** The address a recipient names, whoever owns it (SMTP RCPT). */
  findAddress(fullAddress: string): Promise<EmailAddressRow | undefined> {
    return this.db.selectFrom('email_addresses').selectAll().where('full_address', '=', fullAddress).executeTakeFirst();
  }

  async insert(row: EmailAddressesTable): Promise<void> {
    await this.db.insertInto('email_addresses').values(row).execute();
  }

  /** Renames (a new key) and/or relabels an address in one statement; false when it is not the scope's. */
  async update(scope: EnvScope, fullAddress: string, patch: Partial<Pick<EmailAddressesTable, 'full_address' | 'prefix' | 'display_name' | 'updated_at'>>): Promise<boolean> {
    const res = await this.db
      .updateTable('email_addresses')
      .set(patch)
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('full_address', '=', fullAddress)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  async delete(scope: EnvScope, fullAddress: string): Promise<boolean> {
    const res = await this.db
      .deleteFrom('email_addresses')
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('full_address', '=', fullAddress)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }

  /**
   * The scope's email deliveries whose Message-ID (provider_message_id, without angle brackets)
   * is one of `messageIds` (a reply's In-Reply-To and References); uses deliveries_provider_message.
   */
  repliedDeliveries(scope: EnvScope, messageIds: string[]): Promise<RepliedDelivery[]> {
    if (messageIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('deliveries as d')
      .innerJoin('messages as m', 'm.tracking_id', 'd.tracking_id')
      .select(['d.id', 'd.tracking_id', 'd.provider_message_id', 'm.user_id', 'm.notification_id'])
      .where('d.channel', '=', 'email')
      .where('d.provider_message_id', 'in', messageIds)
      .where('d.account_id', '=', scope.accountId)
      .where('d.env_id', '=', scope.envId)
      .execute();
  }

  async insertInbound(row: InboundEmailsTable): Promise<void> {
    await this.db.insertInto('inbound_emails').values(row).execute();
  }

  /** The scope's inbound mail, newest first; `before` is the previous page's last id. */
  async listInbound(scope: EnvScope, filter: { before?: { received_at: string; id: string }; trackingId?: string; address?: string; limit: number }): Promise<InboundEmailRow[]> {
    let q = this.db
      .selectFrom('inbound_emails')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId);
    if (filter.trackingId) q = q.where('tracking_id', '=', filter.trackingId);
    if (filter.address) q = q.where('address', '=', filter.address);
    const before = filter.before;
    if (before) q = q.where((eb) => eb.or([eb('received_at', '<', before.received_at), eb.and([eb('received_at', '=', before.received_at), eb('id', '<', before.id)])]));
    return q.orderBy('received_at', 'desc').orderBy('id', 'desc').limit(filter.limit).execute();
  }

  findInbound(scope: EnvScope, id: string): Promise<InboundEmailRow | undefined> {
    return this.db.selectFrom('inbound_emails').selectAll().where('account_id', '=', scope.accountId).where('env_id', '=', scope.envId).where('id', '=', id).executeTakeFirst();
  }

  async purgeBefore(before: string): Promise<void> {
    await this.db.deleteFrom('inbound_emails').where('received_at', '<', before).execute();
  }
}

import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { AttemptRow, DeliveryRow, MessageRow, SendingDb, SendingTables } from './sending.tables.js';

/**
 * Reads of messages, their deliveries and attempts (scoped by environment or account), and the
 * insert of accepted messages. Every other write goes through the delivery ledger (modules/delivery).
 */
export class MessagesRepository {
  private readonly db: SendingDb;
  constructor(db: Kysely<CoreTables> | Kysely<any>) {
    this.db = (db as Kysely<CoreTables>).withTables<SendingTables>();
  }

  insertMessage(row: MessageRow): Promise<unknown> {
    return this.db.insertInto('messages').values(row).execute();
  }

  /** Inserts message rows; one already present (a re-run after a crash) is left as it is. */
  async insertMessagesIfAbsent(rows: MessageRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db
      .insertInto('messages')
      .values(rows)
      .onConflict((oc) => oc.column('tracking_id').doNothing())
      .execute();
  }

  findMessage(envId: string, trackingId: string): Promise<MessageRow | undefined> {
    return this.db.selectFrom('messages').selectAll().where('env_id', '=', envId).where('tracking_id', '=', trackingId).executeTakeFirst();
  }

  /** Worker-side read: the job carries the ids it was created with. */
  findMessageForWork(trackingId: string): Promise<MessageRow | undefined> {
    return this.db.selectFrom('messages').selectAll().where('tracking_id', '=', trackingId).executeTakeFirst();
  }

  findDelivery(deliveryId: string): Promise<DeliveryRow | undefined> {
    return this.db.selectFrom('deliveries').selectAll().where('id', '=', deliveryId).executeTakeFirst();
  }

  /** Worker-side read of a batch's deliveries (delivery jobs carry the delivery id). */
  findDeliveries(deliveryIds: string[]): Promise<DeliveryRow[]> {
    if (deliveryIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('deliveries').selectAll().where('id', 'in', deliveryIds).execute();
  }

  /** Worker-side read of a batch's messages. */
  findMessagesForWork(trackingIds: string[]): Promise<MessageRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('messages').selectAll().where('tracking_id', 'in', trackingIds).execute();
  }

  /** The delivery a provider message id belongs to (inbound replies, callbacks). */
  findDeliveryByProviderId(channel: string, providerMessageId: string): Promise<DeliveryRow | undefined> {
    return this.db.selectFrom('deliveries').selectAll().where('channel', '=', channel).where('provider_message_id', '=', providerMessageId).executeTakeFirst();
  }

  deliveriesOf(trackingIds: string[]): Promise<DeliveryRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('deliveries').selectAll().where('tracking_id', 'in', trackingIds).execute();
  }

  attemptsOf(deliveryId: string): Promise<AttemptRow[]> {
    return this.db.selectFrom('delivery_attempts').selectAll().where('delivery_id', '=', deliveryId).orderBy('attempt').execute();
  }

  /** Messages of an account by tracking id (log lookups span the account's environments). */
  messagesByIds(accountId: string, trackingIds: string[]): Promise<MessageRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('tracking_id', 'in', trackingIds)
      .orderBy('received_at', 'desc')
      .execute();
  }
}

import type { Kysely, Updateable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { AttemptRow, DeliveriesTable, DeliveryRow, MessageRow, MessagesTable, SendingDb, SendingTables } from './sending.tables.js';

/** Messages, their deliveries and attempts. Every read is scoped by environment or account. */
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

  async updateMessage(trackingId: string, patch: Updateable<MessagesTable>, expectedStates?: MessageRow['state'][]): Promise<boolean> {
    let q = this.db.updateTable('messages').set(patch).where('tracking_id', '=', trackingId);
    if (expectedStates) q = q.where('state', 'in', expectedStates);
    const res = await q.executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Inserts the deliveries of a message; a second run (after a crash) finds them present and inserts nothing. */
  async insertDeliveries(rows: DeliveryRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db
      .insertInto('deliveries')
      .values(rows)
      .onConflict((oc) => oc.columns(['tracking_id', 'channel']).doNothing())
      .execute();
  }

  findDelivery(deliveryId: string): Promise<DeliveryRow | undefined> {
    return this.db.selectFrom('deliveries').selectAll().where('id', '=', deliveryId).executeTakeFirst();
  }

  async updateDelivery(deliveryId: string, patch: Updateable<DeliveriesTable>, expectedStatus?: DeliveryRow['status']): Promise<boolean> {
    let q = this.db.updateTable('deliveries').set(patch).where('id', '=', deliveryId);
    if (expectedStatus) q = q.where('status', '=', expectedStatus);
    const res = await q.executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  insertAttempt(row: AttemptRow): Promise<unknown> {
    return this.db.insertInto('delivery_attempts').values(row).execute();
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

  /** Deletes messages (and, by cascade, deliveries and attempts) received before `before`. */
  async purgeBefore(before: string, limit = 1000): Promise<number> {
    const ids = await this.db.selectFrom('messages').select('tracking_id').where('received_at', '<', before).limit(limit).execute();
    if (ids.length === 0) return 0;
    const list = ids.map((r) => r.tracking_id);
    await this.db.deleteFrom('delivery_attempts').where('delivery_id', 'in', this.db.selectFrom('deliveries').select('id').where('tracking_id', 'in', list)).execute();
    await this.db.deleteFrom('deliveries').where('tracking_id', 'in', list).execute();
    await this.db.deleteFrom('messages').where('tracking_id', 'in', list).execute();
    return list.length;
  }
}

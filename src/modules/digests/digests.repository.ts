import { type Kysely, sql } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingTables } from '../sending/sending.tables.js';
import type { DigestItemsTable, DigestRow, DigestTables, DigestsDb, DigestsTable } from './digests.tables.js';

/** The key of a user's open digest: one per environment, user, type and channel. */
export interface DigestKey {
  accountId: string;
  envId: string;
  userId: string;
  notificationId: string;
  channel: string;
}

/** A collected delivery as the digest's message shows it: the delivery's rendered content and its send. */
export interface DigestItemRow {
  delivery_id: string;
  tracking_id: string;
  content: string | null;
  preview: string | null;
  created_at: string;
  request: string;
  received_at: string;
  sub_notification_id: string | null;
}

/**
 * Kysely only: digests and their items, every query scoped by account and environment except the
 * due list of the periodic job. Pass a transaction to join one (routing collects inside the
 * ledger's transaction; a digest is claimed inside the transaction that accepts its message).
 */
export class DigestsRepository {
  private readonly db: DigestsDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<SendingTables & DigestTables>();
  }

  /**
   * Counts `items` more into the open digest of `key` and answers it; undefined when there is
   * none. An UPDATE, not a read: on PostgreSQL it locks the row, so a claim of the same digest
   * either waits for this transaction (and then sees its items) or went first (and this finds
   * no open digest and opens the next one).
   */
  joinOpen(key: DigestKey, items: number): Promise<Pick<DigestRow, 'id' | 'due_at' | 'option'> | undefined> {
    return this.db
      .updateTable('digests')
      .set((eb) => ({ item_count: eb('item_count', '+', items) }))
      .where('env_id', '=', key.envId)
      .where('account_id', '=', key.accountId)
      .where('user_id', '=', key.userId)
      .where('notification_id', '=', key.notificationId)
      .where('channel', '=', key.channel)
      .where('state', '=', 'open')
      .returning(['id', 'due_at', 'option'])
      .executeTakeFirst();
  }

  /** Opens a digest; false when another transaction opened one for the same key first. */
  async open(row: DigestsTable): Promise<boolean> {
    const inserted = await this.db
      .insertInto('digests')
      .values(row)
      // The partial index's own predicate, as a literal: SQLite matches it textually (a bound parameter would not).
      .onConflict((oc) => oc.columns(['env_id', 'user_id', 'notification_id', 'channel']).where(sql<boolean>`state = 'open'`).doNothing())
      .returning('id')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  async insertItems(rows: DigestItemsTable[]): Promise<void> {
    if (rows.length > 0) await this.db.insertInto('digest_items').values(rows).execute();
  }

  /** Open digests due at `now`, the longest due first (the periodic job, across environments). */
  due(now: string, limit: number): Promise<Pick<DigestRow, 'id' | 'env_id'>[]> {
    return this.db.selectFrom('digests').select(['id', 'env_id']).where('state', '=', 'open').where('due_at', '<=', now).orderBy('due_at').limit(limit).execute();
  }

  /** open -> sent with its message's trackingId, when still open and due; the claim a digest is sent once by. */
  claim(id: string, now: string, trackingId: string): Promise<DigestRow | undefined> {
    return this.db
      .updateTable('digests')
      .set({ state: 'sent', tracking_id: trackingId, sent_at: now })
      .where('id', '=', id)
      .where('state', '=', 'open')
      .where('due_at', '<=', now)
      .returningAll()
      .executeTakeFirst();
  }

  /** A claimed digest that sends nothing after all: empty, or failed with a code. */
  async settle(digest: Pick<DigestRow, 'id' | 'env_id'>, state: 'empty' | 'failed', failedCode: string | null): Promise<void> {
    await this.db.updateTable('digests').set({ state, tracking_id: null, failed_code: failedCode }).where('id', '=', digest.id).where('env_id', '=', digest.env_id).execute();
  }

  /** The digest's items still collected (a delivery retracted or purged since is not), in the order they came. */
  items(digest: Pick<DigestRow, 'id' | 'env_id' | 'account_id'>): Promise<DigestItemRow[]> {
    return this.db
      .selectFrom('digest_items as i')
      .innerJoin('deliveries as d', 'd.id', 'i.delivery_id')
      .innerJoin('messages as m', 'm.tracking_id', 'i.tracking_id')
      .select(['i.delivery_id', 'i.tracking_id', 'd.content', 'd.preview', 'i.created_at', 'm.request', 'm.received_at', 'm.sub_notification_id'])
      .where('i.digest_id', '=', digest.id)
      .where('i.env_id', '=', digest.env_id)
      .where('i.account_id', '=', digest.account_id)
      .where('d.status', '=', 'digested')
      .orderBy('m.received_at')
      .orderBy('i.tracking_id')
      .execute();
  }

  /** The digest a message carries, when `trackingId` is that digest's message (routing reads it to render it). */
  carriedBy(accountId: string, envId: string, digestId: string, trackingId: string): Promise<DigestRow | undefined> {
    return this.db
      .selectFrom('digests')
      .selectAll()
      .where('id', '=', digestId)
      .where('env_id', '=', envId)
      .where('account_id', '=', accountId)
      .where('tracking_id', '=', trackingId)
      .executeTakeFirst();
  }

  /** The digests of a user, newest first (tests and the log's readers). */
  ofUser(accountId: string, envId: string, userId: string): Promise<DigestRow[]> {
    return this.db.selectFrom('digests').selectAll().where('env_id', '=', envId).where('account_id', '=', accountId).where('user_id', '=', userId).orderBy('created_at', 'desc').execute();
  }
}

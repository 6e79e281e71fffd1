import { type Kysely, type Selectable, sql } from 'kysely';
import type { AnyKysely, InappScope } from './inapp.repository.js';
import type { CoreTables } from '../../storage/schema.js';

/** Conventions of storage/schema.ts: ISO-8601 text timestamps, JSON as text (migration 0081). */
export interface InappBatchesTable {
  env_id: string;
  user_id: string;
  notification_id: string;
  batch_key: string;
  account_id: string;
  batch_id: string;
  opened_at: string;
  closes_at: string;
  count: number;
  updated_at: string;
}

export interface InappBatchItemsTable {
  env_id: string;
  user_id: string;
  tracking_id: string;
  account_id: string;
  batch_id: string;
  seq: number;
  parameters: string;
  created_at: string;
}

export type InappBatchTables = {
  inapp_batches: InappBatchesTable;
  inapp_batch_items: InappBatchItemsTable;
};

export type InappBatchItemRow = Selectable<InappBatchItemsTable>;

/** Which batch a send joins: the batch that is open for its key, or a new one it opens. */
export interface JoinBatch extends InappScope {
  notificationId: string;
  batchKey: string;
  /** The send's trackingId: the batch's id when this send opens it. */
  trackingId: string;
  now: string;
  /** now + the type's batchingWindow. */
  closesAt: string;
}

/** Kysely only; every query scoped by account, environment and user. Pass a transaction to join one. */
export class InappBatchesRepository {
  private readonly db: Kysely<CoreTables & InappBatchTables>;
  constructor(db: AnyKysely) {
    this.db = db.withTables<InappBatchTables>();
  }

  /**
   * One statement: opens a batch for the key (no row yet, or the open one's window has closed)
   * or counts this send into the open one. On PostgreSQL a concurrent send of the same key waits
   * for this transaction's row lock and then counts into what it committed; SQLite has one writer.
   */
  async join(input: JoinBatch): Promise<{ batchId: string; count: number }> {
    const expired = sql<boolean>`inapp_batches.closes_at <= excluded.opened_at`;
    const row = await this.db
      .insertInto('inapp_batches')
      .values({
        env_id: input.envId,
        user_id: input.userId,
        notification_id: input.notificationId,
        batch_key: input.batchKey,
        account_id: input.accountId,
        batch_id: input.trackingId,
        opened_at: input.now,
        closes_at: input.closesAt,
        count: 1,
        updated_at: input.now,
      })
      .onConflict((oc) =>
        oc
          .columns(['env_id', 'user_id', 'notification_id', 'batch_key'])
          .doUpdateSet({
            batch_id: sql`case when ${expired} then excluded.batch_id else inapp_batches.batch_id end`,
            opened_at: sql`case when ${expired} then excluded.opened_at else inapp_batches.opened_at end`,
            closes_at: sql`case when ${expired} then excluded.closes_at else inapp_batches.closes_at end`,
            count: sql`case when ${expired} then 1 else inapp_batches.count + 1 end`,
            updated_at: sql`excluded.updated_at`,
          })
          .where('inapp_batches.account_id', '=', input.accountId),
      )
      .returning(['batch_id', 'count'])
      .executeTakeFirstOrThrow();
    return { batchId: row.batch_id, count: Number(row.count) };
  }

  /**
   * The batch row of a key: which batch is open and how many sends it holds. `lock` (PostgreSQL)
   * holds the row until the transaction ends, so no send joins meanwhile (join waits on it).
   */
  async lockCurrent(scope: InappScope, notificationId: string, batchKey: string, lock: boolean): Promise<{ batch_id: string; count: number } | undefined> {
    let query = this.db
      .selectFrom('inapp_batches')
      .select(['batch_id', 'count'])
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('user_id', '=', scope.userId)
      .where('notification_id', '=', notificationId)
      .where('batch_key', '=', batchKey);
    if (lock) query = query.forUpdate();
    const row = await query.executeTakeFirst();
    return row && { batch_id: row.batch_id, count: Number(row.count) };
  }

  /** The batch item of a send, if it went into one (a retried delivery finds it). */
  findItem(scope: InappScope, trackingId: string): Promise<InappBatchItemRow | undefined> {
    return this.items(scope).selectAll().where('tracking_id', '=', trackingId).executeTakeFirst();
  }

  async insertItem(row: InappBatchItemRow): Promise<void> {
    await this.db.insertInto('inapp_batch_items').values(row).execute();
  }

  /**
   * The latest items of a batch, oldest first: at most `limit`, and older ones only while their
   * parameters, together, stay within `maxChars` (the latest is always there). Sizes are read
   * first, so that items left out are never loaded.
   */
  async latestItems(scope: InappScope, batchId: string, limit: number, maxChars: number): Promise<InappBatchItemRow[]> {
    const sizes = await this.items(scope)
      .select(['seq', sql<number>`length(parameters)`.as('chars')])
      .where('batch_id', '=', batchId)
      .orderBy('seq', 'desc')
      .limit(limit)
      .execute();
    const seqs: number[] = [];
    let chars = 0;
    for (const [i, row] of sizes.entries()) {
      chars += Number(row.chars);
      if (i > 0 && chars > maxChars) break;
      seqs.push(Number(row.seq));
    }
    if (seqs.length === 0) return [];
    return this.items(scope).selectAll().where('batch_id', '=', batchId).where('seq', 'in', seqs).orderBy('seq', 'asc').execute();
  }

  private items(scope: InappScope) {
    return this.db
      .selectFrom('inapp_batch_items')
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('user_id', '=', scope.userId);
  }
}

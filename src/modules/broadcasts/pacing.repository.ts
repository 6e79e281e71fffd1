import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import { type BroadcastsDb, broadcastsDb } from './broadcasts.tables.js';

/**
 * Kysely only: the broadcast rate of each account (broadcast_pacing, migration 0088). A row holds
 * the account's first free slot; every page of any of its broadcasts takes its slots from it.
 */
export class PacingRepository {
  private readonly db: BroadcastsDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = broadcastsDb(db);
  }

  /** The account's first free slot (ISO), or null when it never sent a broadcast. */
  async nextAt(accountId: string): Promise<string | null> {
    const row = await this.db.selectFrom('broadcast_pacing').select('next_at').where('account_id', '=', accountId).executeTakeFirst();
    return row?.next_at ?? null;
  }

  /**
   * Moves the first free slot from `from` (as read; null: no row) to `to`. False when another
   * page took slots since the read: the caller's transaction must roll back its page.
   */
  async take(accountId: string, from: string | null, to: string): Promise<boolean> {
    if (from === null) {
      const inserted = await this.db.insertInto('broadcast_pacing').values({ account_id: accountId, next_at: to }).onConflict((oc) => oc.column('account_id').doNothing()).executeTakeFirst();
      return Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0;
    }
    const result = await this.db.updateTable('broadcast_pacing').set({ next_at: to }).where('account_id', '=', accountId).where('next_at', '=', from).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }
}

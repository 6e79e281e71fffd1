import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import { type BroadcastsDb, broadcastsDb } from './broadcasts.tables.js';

/** Whose slots: the account's (broadcast_pacing), or one sender domain's of the account (broadcast_domain_pacing). */
export interface PacingKey {
  accountId: string;
  domain?: string;
}

/**
 * Kysely only: the broadcast rates of each account (broadcast_pacing, migration 0088) and of each
 * of its sender domains (broadcast_domain_pacing, migration 0092). A row holds the first free slot;
 * every page of a broadcast takes its slots from the account's row and, when its domain has a
 * rate of its own, from the domain's. Scoped by account, not environment: the rate is the
 * account's, shared by its environments.
 */
export class PacingRepository {
  private readonly db: BroadcastsDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = broadcastsDb(db);
  }

  /** The first free slot (ISO), or null when no page took slots there yet. */
  async nextAt(key: PacingKey): Promise<string | null> {
    const row =
      key.domain === undefined
        ? await this.db.selectFrom('broadcast_pacing').select('next_at').where('account_id', '=', key.accountId).executeTakeFirst()
        : await this.db.selectFrom('broadcast_domain_pacing').select('next_at').where('account_id', '=', key.accountId).where('domain', '=', key.domain).executeTakeFirst();
    return row?.next_at ?? null;
  }

  /**
   * Moves the first free slot from `from` (as read; null: no row) to `to`. False when another
   * page took slots since the read: the caller's transaction must roll back its page.
   */
  async take(key: PacingKey, from: string | null, to: string): Promise<boolean> {
    const { accountId, domain } = key;
    if (from === null) {
      const inserted =
        domain === undefined
          ? await this.db.insertInto('broadcast_pacing').values({ account_id: accountId, next_at: to }).onConflict((oc) => oc.column('account_id').doNothing()).executeTakeFirst()
          : await this.db.insertInto('broadcast_domain_pacing').values({ account_id: accountId, domain, next_at: to }).onConflict((oc) => oc.columns(['account_id', 'domain']).doNothing()).executeTakeFirst();
      return Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0;
    }
    const result =
      domain === undefined
        ? await this.db.updateTable('broadcast_pacing').set({ next_at: to }).where('account_id', '=', accountId).where('next_at', '=', from).executeTakeFirst()
        : await this.db.updateTable('broadcast_domain_pacing').set({ next_at: to }).where('account_id', '=', accountId).where('domain', '=', domain).where('next_at', '=', from).executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * The sender (`fromAddress`) of each of the account's broadcasts that shares its rate now: sending,
   * its audience frozen, with pending recipients not handed over yet (one probe of the
   * (broadcast_id, state, seq) index each). Those in their last phase (every recipient handed
   * over, or paused) take no slots and are not counted.
   */
  async sharing(accountId: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('broadcasts as b')
      .select('b.from_address')
      .where('b.account_id', '=', accountId)
      .where('b.status', '=', 'sending')
      .where('b.audience_frozen_at', 'is not', null)
      .where((eb) =>
        eb.exists(
          eb
            .selectFrom('broadcast_recipients as r')
            .select('r.seq')
            .whereRef('r.broadcast_id', '=', 'b.id')
            .where('r.state', '=', 'pending')
            .whereRef('r.seq', '>', 'b.send_cursor'),
        ),
      )
      .execute();
    return rows.map((r) => r.from_address);
  }
}

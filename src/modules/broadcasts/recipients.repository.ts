import { type Kysely, sql } from 'kysely';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import { type BroadcastRecipientsTable, type BroadcastsDb, type RecipientRow, type RecipientState, type SkipReason, broadcastsDb } from './broadcasts.tables.js';

/** Recipients of one broadcast by what they reached (see RecipientsRepository.counts). */
export interface RecipientCounts {
  total: number;
  pending: number;
  skipped: number;
  sent: number;
  delivered: number;
  failed: number;
  bounced: number;
  opened: number;
  clicked: number;
  unsubscribed: number;
  skippedBy: Partial<Record<SkipReason, number>>;
}

/** Kysely only: a broadcast's frozen audience, every query scoped by account and environment. */
export class RecipientsRepository {
  private readonly db: BroadcastsDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = broadcastsDb(db);
  }

  /** Writes a page of recipients; a user already among them (two listed addresses of one user) is left as it is. */
  async insertMany(rows: BroadcastRecipientsTable[]): Promise<void> {
    // 17 columns a row: pages stay well under either engine's bound-parameter limit.
    for (let i = 0; i < rows.length; i += 500) {
      await this.db
        .insertInto('broadcast_recipients')
        .values(rows.slice(i, i + 500))
        .onConflict((oc) => oc.columns(['broadcast_id', 'user_id']).doNothing())
        .execute();
    }
  }

  /**
   * Pending recipients not handed over yet become skipped with `reason` (a canceled broadcast);
   * answers how many. Those handed over (a trackingId) are in flight: their delivery decides.
   */
  async skipPending(scope: EnvScope, broadcastId: string, reason: SkipReason, now: string): Promise<number> {
    const result = await this.db
      .updateTable('broadcast_recipients')
      .set({ state: 'skipped', skip_reason: reason, updated_at: now })
      .where('broadcast_id', '=', broadcastId)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('state', '=', 'pending')
      .where('tracking_id', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  async countPending(scope: EnvScope, broadcastId: string): Promise<number> {
    const row = await this.db
      .selectFrom('broadcast_recipients')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('broadcast_id', '=', broadcastId)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('state', '=', 'pending')
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Recipients handed over (seq up to the send cursor) whose delivery has not been attempted yet, by the state index. */
  async countInFlight(scope: EnvScope, broadcastId: string, sendCursor: number): Promise<number> {
    const row = await this.db
      .selectFrom('broadcast_recipients')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('broadcast_id', '=', broadcastId)
      .where('state', '=', 'pending')
      .where('seq', '<=', sendCursor)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * pending and skipped: recipients in that state now. The others: recipients that reached that
   * step (its time is set), so one who clicked counts as delivered and opened too.
   */
  async counts(scope: EnvScope, broadcastId: string): Promise<RecipientCounts> {
    const scoped = this.db
      .selectFrom('broadcast_recipients')
      .where('broadcast_id', '=', broadcastId)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId);
    const row = await scoped
      .select((eb) => [
        eb.fn.countAll<number>().as('total'),
        sql<number>`sum(case when state = 'pending' then 1 else 0 end)`.as('pending'),
        sql<number>`sum(case when state = 'skipped' then 1 else 0 end)`.as('skipped'),
        eb.fn.count<number>('sent_at').as('sent'),
        eb.fn.count<number>('delivered_at').as('delivered'),
        eb.fn.count<number>('failed_at').as('failed'),
        eb.fn.count<number>('bounced_at').as('bounced'),
        eb.fn.count<number>('opened_at').as('opened'),
        eb.fn.count<number>('clicked_at').as('clicked'),
        eb.fn.count<number>('unsubscribed_at').as('unsubscribed'),
      ])
      .executeTakeFirstOrThrow();
    const reasons = await scoped
      .select((eb) => ['skip_reason', eb.fn.countAll<number>().as('n')])
      .where('state', '=', 'skipped')
      .groupBy('skip_reason')
      .execute();
    const skippedBy: Partial<Record<SkipReason, number>> = {};
    for (const r of reasons) if (r.skip_reason) skippedBy[r.skip_reason] = Number(r.n);
    const n = (v: unknown) => Number(v ?? 0);
    return {
      total: n(row.total),
      pending: n(row.pending),
      skipped: n(row.skipped),
      sent: n(row.sent),
      delivered: n(row.delivered),
      failed: n(row.failed),
      bounced: n(row.bounced),
      opened: n(row.opened),
      clicked: n(row.clicked),
      unsubscribed: n(row.unsubscribed),
      skippedBy,
    };
  }

  /** A page in freeze order (seq); `after`: the last seq of the previous page. */
  list(scope: EnvScope, broadcastId: string, options: { state?: RecipientState; after?: number; limit: number }): Promise<RecipientRow[]> {
    let query = this.db
      .selectFrom('broadcast_recipients')
      .selectAll()
      .where('broadcast_id', '=', broadcastId)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId);
    if (options.state) query = query.where('state', '=', options.state);
    if (options.after !== undefined) query = query.where('seq', '>', options.after);
    return query.orderBy('seq').limit(options.limit).execute();
  }
}

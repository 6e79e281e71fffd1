import type { ExpressionBuilder, Kysely, Updateable } from 'kysely';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import type { BroadcastStatus } from './broadcast-states.js';
import { type BroadcastRow, type BroadcastTables, type BroadcastTransitionsTable, type BroadcastsDb, type BroadcastsTable, type TransitionRow, broadcastsDb } from './broadcasts.tables.js';

/** A broadcast whose delivery chain marked no step since `before` (never started: whose audience was frozen before it). */
const quietSince = (before: string) => (eb: ExpressionBuilder<BroadcastTables, 'broadcasts'>) =>
  eb.or([eb('send_step_at', '<', before), eb.and([eb('send_step_at', 'is', null), eb('audience_frozen_at', '<', before)])]);

/** What a conditional update expects to find: the status read, and whether the broadcast was archived. */
export interface Expected {
  status: BroadcastStatus;
  archived: boolean;
}

/**
 * Kysely only: broadcasts and their transitions, every query scoped by account and environment
 * except the due list of the start job, the recovery sweep's list of quiet chains and the freeze
 * job's reads by id. Pass a transaction to
 * join one.
 */
export class BroadcastsRepository {
  private readonly db: BroadcastsDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = broadcastsDb(db);
  }

  async insert(row: BroadcastsTable): Promise<void> {
    await this.db.insertInto('broadcasts').values(row).execute();
  }

  find(scope: EnvScope, id: string): Promise<BroadcastRow | undefined> {
    return this.db.selectFrom('broadcasts').selectAll().where('env_id', '=', scope.envId).where('account_id', '=', scope.accountId).where('id', '=', id).executeTakeFirst();
  }

  /** Newest first (ids are UUIDv7); `before`: the last id of the previous page. */
  list(scope: EnvScope, options: { before?: string; limit: number; archived: boolean }): Promise<BroadcastRow[]> {
    let query = this.db.selectFrom('broadcasts').selectAll().where('env_id', '=', scope.envId).where('account_id', '=', scope.accountId);
    if (!options.archived) query = query.where('archived_at', 'is', null);
    if (options.before) query = query.where('id', '<', options.before);
    return query.orderBy('id', 'desc').limit(options.limit).execute();
  }

  /**
   * Applies `patch` if the broadcast is still as `expected` (its status, archived or not): the
   * compare-and-set every operation goes through. Answers the updated row, or undefined when
   * another operation changed it first.
   */
  update(scope: EnvScope, id: string, expected: Expected, patch: Updateable<BroadcastsTable>): Promise<BroadcastRow | undefined> {
    return this.db
      .updateTable('broadcasts')
      .set(patch)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('id', '=', id)
      .where('status', '=', expected.status)
      .where('archived_at', expected.archived ? 'is not' : 'is', null)
      .returningAll()
      .executeTakeFirst();
  }

  /** Deletes a broadcast still in `status` (its transitions go with it). */
  async delete(scope: EnvScope, id: string, status: BroadcastStatus): Promise<boolean> {
    const result = await this.db
      .deleteFrom('broadcasts')
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('id', '=', id)
      .where('status', '=', status)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async insertTransition(row: BroadcastTransitionsTable): Promise<void> {
    await this.db.insertInto('broadcast_transitions').values(row).execute();
  }

  /** A broadcast's transitions, oldest first. */
  transitions(scope: EnvScope, id: string): Promise<TransitionRow[]> {
    return this.db
      .selectFrom('broadcast_transitions')
      .selectAll()
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('broadcast_id', '=', id)
      .orderBy('id')
      .execute();
  }

  /** Scheduled broadcasts due at `now`, across environments (the start job), the longest due first. */
  due(now: string, limit: number): Promise<Pick<BroadcastRow, 'id' | 'account_id' | 'env_id'>[]> {
    return this.db
      .selectFrom('broadcasts')
      .select(['id', 'account_id', 'env_id'])
      .where('status', '=', 'scheduled')
      .where('schedule_at', '<=', now)
      .orderBy('schedule_at')
      .limit(limit)
      .execute();
  }

  /**
   * Records one frozen page: moves the freeze cursor from `from` (the value read before the page)
   * to `to` and the recipient count to `count`. False when another run of the freeze moved it
   * first: the caller's transaction must then roll back its page.
   */
  async advanceFreeze(scope: EnvScope, id: string, from: string | null, to: string, count: number, now: string): Promise<boolean> {
    const result = await this.db
      .updateTable('broadcasts')
      .set({ freeze_cursor: to, frozen_count: count, updated_at: now })
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('id', '=', id)
      .where('freeze_cursor', from === null ? 'is' : '=', from)
      .where('audience_frozen_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Marks the audience frozen (every recipient row written). */
  async finishFreeze(scope: EnvScope, id: string, now: string): Promise<boolean> {
    const result = await this.db
      .updateTable('broadcasts')
      .set({ audience_frozen_at: now, updated_at: now })
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('id', '=', id)
      .where('audience_frozen_at', 'is', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Gives the broadcast's delivery to the job chain `token` (a chain holding another token stops),
   * its first step marked now and the recovery's backoff reset. False unless sending.
   */
  async claimDelivery(scope: EnvScope, id: string, token: string, now: string): Promise<boolean> {
    const result = await this.db
      .updateTable('broadcasts')
      .set({ send_token: token, send_step_at: now, send_restarts: 0, updated_at: now })
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('id', '=', id)
      .where('status', '=', 'sending')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Records one handed-over page: the send cursor from `from` (as read) to `to`, while the
   * broadcast is sending and owned by the chain `token`. False otherwise (paused, canceled,
   * another chain or run moved it): the caller's transaction must roll back its page. Run first
   * in the page's transaction, so on PostgreSQL it holds the broadcast's row until the commit
   * (a pause or cancel waits for the page, then sees its trackingIds). It marks the chain's step
   * and, as progress, resets the recovery's backoff.
   */
  async advanceSend(scope: EnvScope, id: string, token: string, from: number, to: number, now: string): Promise<boolean> {
    const result = await this.db
      .updateTable('broadcasts')
      .set({ send_cursor: to, send_step_at: now, send_restarts: 0, updated_at: now })
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('id', '=', id)
      .where('status', '=', 'sending')
      .where('send_token', '=', token)
      .where('send_cursor', '=', from)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Moves the send cursor back to `to` inside the page's transaction (the rest of a page over the account's cap). */
  async setSendCursor(scope: EnvScope, id: string, to: number): Promise<void> {
    await this.db.updateTable('broadcasts').set({ send_cursor: to }).where('env_id', '=', scope.envId).where('account_id', '=', scope.accountId).where('id', '=', id).execute();
  }

  /** Marks a step of the chain `token` (send_step_at), while it owns the broadcast. */
  async markStep(scope: EnvScope, id: string, token: string, now: string): Promise<void> {
    await this.db
      .updateTable('broadcasts')
      .set({ send_step_at: now })
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('id', '=', id)
      .where('send_token', '=', token)
      .execute();
  }

  /**
   * Sending broadcasts, across accounts (the recovery sweep), whose delivery chain ran no step
   * since `before` (or, never started, whose audience was frozen before it), in id order after
   * `after` (the last id of the previous batch).
   */
  quietChains(before: string, limit: number, after: string | null): Promise<Pick<BroadcastRow, 'id' | 'account_id' | 'env_id' | 'send_token' | 'send_step_at' | 'send_restarts' | 'audience_frozen_at'>[]> {
    let query = this.db.selectFrom('broadcasts');
    if (after !== null) query = query.where('id', '>', after);
    return query
      .select(['id', 'account_id', 'env_id', 'send_token', 'send_step_at', 'send_restarts', 'audience_frozen_at'])
      .where('status', '=', 'sending')
      .where('audience_frozen_at', 'is not', null)
      .where(quietSince(before))
      .orderBy('id')
      .limit(limit)
      .execute();
  }

  /**
   * Gives delivery to a new chain `to` in place of the chain `from` (null: none started) if that
   * chain is still the owner and still ran no step since `before`: a chain that stepped after the
   * sweep's read keeps the broadcast. Counts the restart (the backoff of the next one).
   */
  async restartDelivery(scope: EnvScope, id: string, from: string | null, to: string, before: string, now: string): Promise<boolean> {
    const result = await this.db
      .updateTable('broadcasts')
      .set((eb) => ({ send_token: to, send_step_at: now, send_restarts: eb('send_restarts', '+', 1), updated_at: now }))
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('id', '=', id)
      .where('status', '=', 'sending')
      .where('send_token', from === null ? 'is' : '=', from)
      .where(quietSince(before))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }
}

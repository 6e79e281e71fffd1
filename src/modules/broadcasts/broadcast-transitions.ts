import type { Kysely, Updateable } from 'kysely';
import type { Deps } from '../../deps.js';
import { AppError, notFound } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import { type BroadcastOperation, type BroadcastStatus, DELETED, NEEDS_ARCHIVED, NEW, OPERATION_ACTORS, type PausedReason, REFUSED_WHILE_ARCHIVED, nextStatus, refusal } from './broadcast-states.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import type { BroadcastRow, BroadcastsTable } from './broadcasts.tables.js';

/** The actor of the service's own transitions (the start job, the freeze, delivery). */
export const SYSTEM = 'system';

export interface ApplyOptions {
  /** Rules on the broadcast as read (400s), checked before the change, outside its transaction. */
  check?: (row: BroadcastRow) => Promise<void> | void;
  /** Fields the operation sets besides status, paused_reason and updated_at. */
  patch?: (row: BroadcastRow, now: string) => Updateable<BroadcastsTable>;
  /** Required when the operation enters paused. */
  pausedReason?: PausedReason;
  /** Writes that commit with the change (recipients, jobs), given the updated row. */
  within?: (trx: Kysely<CoreTables>, row: BroadcastRow, now: string) => Promise<void>;
}

/** Conditional updates that lose to a concurrent operation are decided again this many times. */
const ATTEMPTS = 3;

/**
 * Applies an operation of broadcast-states.ts: refuses it (409 CONFLICT naming the current state)
 * where the table has no row for the broadcast's status, otherwise changes the status with a
 * compare-and-set on the status read and records the transition (time, actor, paused reason) in
 * the same transaction. The one writer of a broadcast's status.
 */
export class BroadcastTransitions {
  constructor(private readonly deps: Pick<Deps, 'db' | 'clock' | 'ids'>) {}

  /** Throws the 409 of `operation` when the table refuses it for the broadcast as it is. */
  assertAllowed(operation: BroadcastOperation, row: Pick<BroadcastRow, 'status' | 'archived_at'>): void {
    const archived = row.archived_at !== null;
    const allowed =
      nextStatus(operation, row.status) !== undefined &&
      !(archived && REFUSED_WHILE_ARCHIVED.includes(operation)) &&
      !(!archived && NEEDS_ARCHIVED.includes(operation));
    if (!allowed) {
      const { message, fix } = refusal(operation, row.status, archived);
      throw new AppError('CONFLICT', message, fix);
    }
  }

  async apply(scope: EnvScope, id: string, operation: BroadcastOperation, actor: string, options: ApplyOptions = {}): Promise<BroadcastRow> {
    const allowedActor = OPERATION_ACTORS[operation];
    if ((allowedActor === 'system' && actor !== SYSTEM) || (allowedActor === 'user' && actor === SYSTEM)) {
      throw new Error(`${operation} is applied by ${allowedActor === 'system' ? 'the service only' : 'a caller only'}, not by ${actor}`);
    }
    const repo = new BroadcastsRepository(this.deps.db);
    for (let attempt = 1; ; attempt++) {
      const row = await repo.find(scope, id);
      if (!row) throw notFoundBroadcast(id);
      this.assertAllowed(operation, row);
      await options.check?.(row);
      const next = nextStatus(operation, row.status) as BroadcastStatus;
      // Entering paused records why; staying paused (archive, unarchive) keeps the reason it has.
      const entersPause = next === 'paused' && row.status !== 'paused';
      const pausedReason = entersPause ? (options.pausedReason ?? 'PAUSED_BY_USER') : next === 'paused' ? row.paused_reason : null;
      const updated = await this.deps.db.transaction().execute(async (trx) => {
        const now = this.deps.clock.now().toISOString();
        const tx = new BroadcastsRepository(trx);
        const changed = await tx.update(
          scope,
          id,
          { status: row.status, archived: row.archived_at !== null },
          { ...options.patch?.(row, now), status: next, paused_reason: pausedReason, updated_at: now },
        );
        if (!changed) return undefined;
        await tx.insertTransition(this.transition(scope, id, operation, row.status, next, actor, now, entersPause ? pausedReason : null));
        await options.within?.(trx, changed, now);
        return changed;
      });
      if (updated) return updated;
      if (attempt >= ATTEMPTS) throw new AppError('CONFLICT', 'This broadcast is being changed by another request.', 'Retry the request.');
    }
  }

  /** Records the creation of a broadcast inside the transaction that inserts it. */
  async created(trx: Kysely<CoreTables>, row: BroadcastRow, actor: string): Promise<void> {
    await new BroadcastsRepository(trx).insertTransition(this.transition({ accountId: row.account_id, envId: row.env_id }, row.id, 'create', NEW, 'draft', actor, row.created_at, null));
  }

  /** Deletes a draft (the table's delete row); its transitions and recipients go with it. */
  async delete(scope: EnvScope, id: string): Promise<void> {
    const repo = new BroadcastsRepository(this.deps.db);
    for (let attempt = 1; ; attempt++) {
      const row = await repo.find(scope, id);
      if (!row) throw notFoundBroadcast(id);
      this.assertAllowed('delete', row);
      if (nextStatus('delete', row.status) === DELETED && (await repo.delete(scope, id, row.status))) return;
      if (attempt >= ATTEMPTS) throw new AppError('CONFLICT', 'This broadcast is being changed by another request.', 'Retry the request.');
    }
  }

  private transition(scope: EnvScope, broadcastId: string, operation: BroadcastOperation, from: BroadcastStatus | typeof NEW, to: BroadcastStatus, actor: string, at: string, pausedReason: PausedReason | null) {
    return {
      id: this.deps.ids.uuid(),
      broadcast_id: broadcastId,
      account_id: scope.accountId,
      env_id: scope.envId,
      operation,
      from_status: from,
      to_status: to,
      paused_reason: pausedReason,
      actor,
      at,
    };
  }
}

export const notFoundBroadcast = (id: string) => notFound('Broadcast', id, 'GET /broadcasts lists the broadcasts of this environment (archived ones with ?archived=true).');

import { type Kysely, type Updateable, sql } from 'kysely';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingTables } from '../sending/sending.tables.js';
import { type BroadcastRecipientsTable, type BroadcastTables, type RecipientRow, type RecipientState } from './broadcasts.tables.js';

/** Recipients per statement of setEach: each row reads the CASE on seq, so a statement costs about the square of its rows. */
const SET_EACH_CHUNK = 50;

/** A handed-over recipient with what the delivery ledger holds of its message (null: not written yet). */
export interface TrackedRecipient
  extends Pick<RecipientRow, 'seq' | 'state' | 'sent_at' | 'delivered_at' | 'failed_at' | 'bounced_at' | 'opened_at' | 'clicked_at' | 'unsubscribed_at' | 'skip_reason'> {
  message_state: string | null;
  message_failed_at: string | null;
  message_skipped: string | null;
  delivery_status: string | null;
  delivery_sent_at: string | null;
  delivery_delivered_at: string | null;
  delivery_failed_at: string | null;
  delivery_failed_code: string | null;
  delivery_routing_reason: string | null;
  delivery_extra: string | null;
}

/**
 * Kysely only: the delivery side of a broadcast's recipients, every query scoped by account and
 * environment. Reads the delivery ledger's rows (messages, deliveries) by the recipients'
 * trackingIds; it never writes them (their one writer is the ledger).
 */
export class RecipientDeliveryRepository {
  private readonly db: Kysely<CoreTables & SendingTables & BroadcastTables>;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<SendingTables & BroadcastTables>();
  }

  /** Pending recipients not handed over yet (seq above the send cursor), in seq order. */
  toSend(scope: EnvScope, broadcastId: string, after: number, limit: number): Promise<Pick<RecipientRow, 'seq' | 'user_id' | 'email'>[]> {
    return this.db
      .selectFrom('broadcast_recipients')
      .select(['seq', 'user_id', 'email'])
      .where('broadcast_id', '=', broadcastId)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('state', '=', 'pending')
      .where('seq', '>', after)
      .orderBy('seq')
      .limit(limit)
      .execute();
  }

  /**
   * Records the message each recipient was handed over as (still pending until it is sent): one
   * statement for a page (CASE on seq), not one per recipient, since the page's transaction holds
   * the account's usage counter until it commits.
   */
  async handedOver(scope: EnvScope, broadcastId: string, rows: { seq: number; trackingId: string; dueAt: string }[], now: string): Promise<void> {
    if (rows.length === 0) return;
    const caseOf = (value: (r: (typeof rows)[number]) => string) => sql<string>`case seq ${sql.join(rows.map((r) => sql`when ${r.seq} then ${value(r)}`), sql` `)} end`;
    await this.db
      .updateTable('broadcast_recipients')
      .set({ tracking_id: caseOf((r) => r.trackingId), due_at: caseOf((r) => r.dueAt), updated_at: now })
      .where('broadcast_id', '=', broadcastId)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('seq', 'in', rows.map((r) => r.seq))
      .execute();
  }

  /**
   * Writes each recipient its own patch, only while it is still in `fromState` (as a sync read
   * it): one statement for up to 50 recipients whose patches set the same columns (a CASE on seq
   * for a column whose values differ), instead of one statement each. A sync writes a whole page
   * of recipients, one for each mail of a broadcast.
   */
  async setEach(scope: EnvScope, broadcastId: string, fromState: RecipientState, rows: { seq: number; patch: Updateable<BroadcastRecipientsTable> }[]): Promise<void> {
    const byColumns = new Map<string, typeof rows>();
    for (const row of rows) {
      const key = Object.keys(row.patch).sort().join(',');
      const group = byColumns.get(key);
      if (group) group.push(row);
      else byColumns.set(key, [row]);
    }
    for (const [key, group] of byColumns) {
      const columns = key.split(',') as (keyof BroadcastRecipientsTable)[];
      for (let i = 0; i < group.length; i += SET_EACH_CHUNK) {
        const chunk = group.slice(i, i + SET_EACH_CHUNK);
        const set: Record<string, unknown> = {};
        for (const column of columns) {
          const values = chunk.map((r) => r.patch[column] ?? null);
          set[column] = values.every((v) => v === values[0]) ? values[0] : sql`case seq ${sql.join(chunk.map((r, j) => sql`when ${r.seq} then ${values[j]}`), sql` `)} end`;
        }
        await this.db
          .updateTable('broadcast_recipients')
          .set(set as Updateable<BroadcastRecipientsTable>)
          .where('broadcast_id', '=', broadcastId)
          .where('env_id', '=', scope.envId)
          .where('account_id', '=', scope.accountId)
          .where('state', '=', fromState)
          .where('seq', 'in', chunk.map((r) => r.seq))
          .execute();
      }
    }
  }

  /** Writes `patch` to one recipient. */
  async set(scope: EnvScope, broadcastId: string, seq: number, patch: Updateable<BroadcastRecipientsTable>): Promise<void> {
    await this.db
      .updateTable('broadcast_recipients')
      .set(patch)
      .where('broadcast_id', '=', broadcastId)
      .where('env_id', '=', scope.envId)
      .where('account_id', '=', scope.accountId)
      .where('seq', '=', seq)
      .execute();
  }

  /**
   * A page of handed-over recipients in `state` with their message and email delivery, in seq
   * order from `after` to `upTo` (the send cursor: every handed-over recipient is at or below
   * it), so each page is one range of the (broadcast_id, state, seq) index.
   */
  tracked(scope: EnvScope, broadcastId: string, state: RecipientState, after: number, upTo: number, limit: number): Promise<TrackedRecipient[]> {
    return this.db
      .selectFrom('broadcast_recipients as r')
      .leftJoin('messages as m', 'm.tracking_id', 'r.tracking_id')
      .leftJoin('deliveries as d', (join) => join.onRef('d.tracking_id', '=', 'r.tracking_id').on('d.channel', '=', 'email'))
      .select([
        'r.seq',
        'r.state',
        'r.sent_at',
        'r.delivered_at',
        'r.failed_at',
        'r.bounced_at',
        'r.opened_at',
        'r.clicked_at',
        'r.unsubscribed_at',
        'r.skip_reason',
        'm.state as message_state',
        'm.failed_at as message_failed_at',
        'm.skipped as message_skipped',
        'd.status as delivery_status',
        'd.sent_at as delivery_sent_at',
        'd.delivered_at as delivery_delivered_at',
        'd.failed_at as delivery_failed_at',
        'd.failed_code as delivery_failed_code',
        'd.routing_reason as delivery_routing_reason',
        'd.extra as delivery_extra',
      ])
      .where('r.broadcast_id', '=', broadcastId)
      .where('r.env_id', '=', scope.envId)
      .where('r.account_id', '=', scope.accountId)
      .where('r.state', '=', state)
      .where('r.seq', '>', after)
      .where('r.seq', '<=', upTo)
      .where('r.tracking_id', 'is not', null)
      .orderBy('r.seq')
      .limit(limit)
      .execute();
  }
}

import { CompiledQuery, type Kysely, type RawBuilder, type Updateable, sql } from 'kysely';
import { sqliteInsert } from '../../storage/bulk-insert.js';
import type { Dialect } from '../../storage/db.js';
import { deferred } from '../../storage/pg-prepared.js';
import { paddedToPowerOfTwo, powerOfTwoChunks } from '../../storage/statement-shapes.js';
import type { CoreTables } from '../../storage/schema.js';
import { ATTEMPT_COLUMNS, type AttemptRow, DELIVERY_COLUMNS, type DeliveriesTable, type DeliveryRow, type MessagesTable, type ProviderEventsTable, type SendingTables } from '../sending/sending.tables.js';
import { type DeliveryEventsTable, type DeliveryTables, EVENT_COLUMNS, type LedgerDb } from './delivery.tables.js';

/** What a transition event needs to know about the row it changed. */
export interface MessageIdentity {
  tracking_id: string;
  account_id: string;
  env_id: string;
}
export interface DeliveryIdentity extends MessageIdentity {
  id: string;
  channel: string;
}

/** The columns updateDeliveriesFrom sets: those of a successful provider call (successFields). */
const DELIVERY_VALUE_COLUMNS = ['status', 'attempts', 'sent_at', 'delivered_at', 'provider_message_id', 'extra', 'updated_at'] as const;
export type DeliveryValues = { id: string } & Pick<DeliveryRow, (typeof DELIVERY_VALUE_COLUMNS)[number]>;

/** Log fields to merge into a message's delivery on one channel (mergeExtraByMessage). */
export interface ExtraByMessage extends MessageIdentity {
  channel: string;
  /** A JSON object's text. */
  extra: string;
}

/** A delivery someone engaged with (opened, clicked), with what its event needs. */
export interface EngagedDelivery extends DeliveryIdentity {
  status: string;
  extra: string | null;
  user_id: string;
  notification_id: string;
}

/** Rows per INSERT: well under SQLite's bound-parameter limit with 12 columns each. */
const INSERT_CHUNK = 500;
/** Rows per INSERT on SQLite, in chunks of powers of two up to this (statement-shapes.ts). */
const SQLITE_INSERT_CHUNK = 64;

/**
 * The SQL of the delivery ledger: the only writes to messages (after acceptance), deliveries,
 * delivery_attempts, provider_events and delivery_events. Every state change is conditional on
 * the state it changes from (`WHERE state = from`), so a re-run or a race changes nothing twice.
 */
export class LedgerRepository {
  private readonly db: LedgerDb;
  /** Take row locks on reads made for a read-modify-write (PostgreSQL; SQLite serializes writers itself). */
  private readonly lockRows: boolean;
  constructor(
    db: Kysely<CoreTables>,
    private readonly dialect: Dialect = 'sqlite',
  ) {
    this.lockRows = dialect === 'postgres';
    this.db = db.withTables<SendingTables & DeliveryTables>();
  }

  // --- messages ---------------------------------------------------------------------------

  /** Changes messages that are in state `from`; returns those it changed. */
  updateMessagesFrom(trackingIds: string[], from: string, patch: Updateable<MessagesTable>): Promise<MessageIdentity[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db
      .updateTable('messages')
      .set(patch)
      .where('tracking_id', 'in', paddedToPowerOfTwo(trackingIds))
      .where('state', '=', from as MessagesTable['state'])
      .returning(['tracking_id', 'account_id', 'env_id'])
      .execute();
  }

  messageStates(trackingIds: string[]): Promise<{ tracking_id: string; state: string }[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('messages').select(['tracking_id', 'state']).where('tracking_id', 'in', trackingIds).execute();
  }

  /** Deletes messages (with their deliveries and attempts) received before `before`; returns how many. */
  async purgeMessagesBefore(before: string, limit = 1000): Promise<number> {
    const ids = await this.db.selectFrom('messages').select('tracking_id').where('received_at', '<', before).limit(limit).execute();
    return this.deleteMessages(ids.map((r) => r.tracking_id));
  }

  /** Deletes the messages of one type of one environment received before `before` (its retention); returns how many. */
  async purgeTypeMessagesBefore(envId: string, notificationId: string, before: string, limit = 1000): Promise<number> {
    const ids = await this.db
      .selectFrom('messages')
      .select('tracking_id')
      .where('env_id', '=', envId)
      .where('notification_id', '=', notificationId)
      .where('received_at', '<', before)
      .limit(limit)
      .execute();
    return this.deleteMessages(ids.map((r) => r.tracking_id));
  }

  /** Deletes messages with their deliveries and attempts; returns how many. */
  private async deleteMessages(list: string[]): Promise<number> {
    if (list.length === 0) return 0;
    await this.db.deleteFrom('delivery_attempts').where('delivery_id', 'in', this.db.selectFrom('deliveries').select('id').where('tracking_id', 'in', list)).execute();
    await this.db.deleteFrom('deliveries').where('tracking_id', 'in', list).execute();
    await this.db.deleteFrom('messages').where('tracking_id', 'in', list).execute();
    return list.length;
  }

  // --- deliveries and attempts ------------------------------------------------------------

  /** Inserts deliveries; one already present (a re-run) is left alone. Returns the ids inserted. */
  async insertDeliveries(rows: DeliveryRow[]): Promise<Set<string>> {
    const ids = new Set<string>();
    for (const chunk of this.insertChunks(rows)) {
      if (this.dialect === 'sqlite') {
        const { rows: inserted } = await this.db.executeQuery<{ id: string }>(sqliteInsert('deliveries', DELIVERY_COLUMNS, chunk, 'ON CONFLICT ("tracking_id", "channel") DO NOTHING RETURNING "id"'));
        for (const r of inserted) ids.add(r.id);
        continue;
      }
      const inserted = await this.db
        .insertInto('deliveries')
        .values(chunk)
        .onConflict((oc) => oc.columns(['tracking_id', 'channel']).doNothing())
        .returning('id')
        .execute();
      for (const r of inserted) ids.add(r.id);
    }
    return ids;
  }

  async insertAttempts(rows: AttemptRow[]): Promise<void> {
    await this.insertAll('delivery_attempts', ATTEMPT_COLUMNS, rows);
  }

  /**
   * Inserts rows of a ledger table, in insertChunks statements (on SQLite written as text:
   * sqliteInsert). On PostgreSQL they are deferred (PgClient): nobody reads what they answer, so
   * inside a transaction they go with the statement after them instead of a round trip each (a
   * failure is thrown by the next statement waited for, or by COMMIT).
   */
  private async insertAll<T extends 'delivery_attempts' | 'delivery_events'>(table: T, columns: readonly (keyof (SendingTables & DeliveryTables)[T] & string)[], rows: (SendingTables & DeliveryTables)[T][]): Promise<void> {
    for (const chunk of this.insertChunks(rows)) {
      if (this.dialect === 'sqlite') await this.db.executeQuery(sqliteInsert(table, columns, chunk));
      // (Kysely cannot relate a generic table's row type to its insert type: the rows are whole rows of it.)
      else {
        const insert = this.db.insertInto(table).values(chunk as never).compile();
        await this.db.executeQuery(CompiledQuery.raw(deferred(insert.sql), [...insert.parameters]));
      }
    }
  }

  /**
   * A multi-row INSERT's rows in statements: on SQLite in a few sizes, so that each size is
   * compiled once (statement-shapes.ts); on PostgreSQL, which compiles each statement anyway,
   * as few as the parameter limit allows.
   */
  private insertChunks<T>(rows: T[]): T[][] {
    if (this.dialect === 'sqlite') return powerOfTwoChunks(rows, SQLITE_INSERT_CHUNK);
    const chunks: T[][] = [];
    for (let i = 0; i < rows.length; i += INSERT_CHUNK) chunks.push(rows.slice(i, i + INSERT_CHUNK));
    return chunks;
  }

  /** Changes a delivery that is in status `from`; returns it when changed. */
  updateDeliveryFrom(deliveryId: string, from: string, patch: Updateable<DeliveriesTable>): Promise<DeliveryIdentity | undefined> {
    const { extra, ...rest } = patch;
    return this.db
      .updateTable('deliveries')
      .set(extra === undefined ? rest : { ...rest, extra: this.mergedExtra(sql.ref('extra'), sql`${extra}`) })
      .where('id', '=', deliveryId)
      .where('status', '=', from as DeliveriesTable['status'])
      .returning(['id', 'tracking_id', 'account_id', 'env_id', 'channel'])
      .executeTakeFirst();
  }

  /**
   * Changes several deliveries that are in status `from`, each to its own values of `columns`,
   * in one statement (the rows travel as one JSON parameter); returns those changed.
   */
  async updateDeliveriesFrom(rows: DeliveryValues[], from: string): Promise<DeliveryIdentity[]> {
    if (rows.length === 0) return [];
    // Keys other than id and the columns are not read.
    const json = JSON.stringify(rows);
    const set = sql.join(
      DELIVERY_VALUE_COLUMNS.map((c) => (c === 'extra' ? sql`extra = ${this.mergedExtra(sql.ref('deliveries.extra'), sql.ref('v.extra'))}` : sql`${sql.ref(c)} = v.${sql.ref(c)}`)),
    );
    const values =
      this.dialect === 'postgres'
        ? sql`jsonb_to_recordset(${json}::jsonb) AS v(id text, status text, attempts integer, sent_at text, delivered_at text, provider_message_id text, extra text, updated_at text)`
        : sql`(SELECT value ->> 'id' AS id, ${sql.join(DELIVERY_VALUE_COLUMNS.map((c) => sql`value ->> ${sql.lit(c)} AS ${sql.ref(c)}`))} FROM json_each(${json})) AS v`;
    const { rows: changed } = await sql<DeliveryIdentity>`
      UPDATE deliveries SET ${set} FROM ${values}
      WHERE deliveries.id = v.id AND deliveries.status = ${from}
      RETURNING deliveries.id, deliveries.tracking_id, deliveries.account_id, deliveries.env_id, deliveries.channel`.execute(this.db);
    return changed;
  }

  /**
   * `current` with the log fields of `added` merged in (added wins on a shared key), as a
   * transition writes `extra`: fields recorded before it committed (an open or a reply that
   * arrived while the provider's answer was being recorded) are kept, not overwritten.
   * SQLite's json_patch drops keys whose new value is null; PostgreSQL's || keeps them.
   */
  private mergedExtra(current: RawBuilder<unknown>, added: RawBuilder<unknown>): RawBuilder<string | null> {
    return this.dialect === 'postgres'
      ? sql<string | null>`CASE WHEN ${current} IS NULL THEN ${added}::text WHEN ${added}::text IS NULL THEN ${current} ELSE (${current}::jsonb || ${added}::jsonb)::text END`
      : sql<string | null>`CASE WHEN ${current} IS NULL THEN ${added} WHEN ${added} IS NULL THEN ${current} ELSE json_patch(${current}, ${added}) END`;
  }

  async deliveryStatus(deliveryId: string): Promise<string | undefined> {
    return (await this.db.selectFrom('deliveries').select('status').where('id', '=', deliveryId).executeTakeFirst())?.status;
  }

  /** The deliveries of these messages with their status (a retract decides per delivery). */
  deliveriesOf(trackingIds: string[]): Promise<(DeliveryIdentity & { status: string })[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('deliveries').select(['id', 'tracking_id', 'account_id', 'env_id', 'channel', 'status']).where('tracking_id', 'in', trackingIds).orderBy('id').execute();
  }

  /** A delivery's `extra`, locked for a read-modify-write; undefined when it does not exist. */
  async deliveryExtraForUpdate(deliveryId: string): Promise<{ extra: string | null } | undefined> {
    let q = this.db.selectFrom('deliveries').select('extra').where('id', '=', deliveryId);
    if (this.lockRows) q = q.forUpdate();
    return q.executeTakeFirst();
  }

  /** A delivery with its message's recipient and type, locked for an engagement merged into it. */
  async deliveryForEngagementForUpdate(deliveryId: string): Promise<EngagedDelivery | undefined> {
    const row = await this.deliveryExtraForUpdate(deliveryId);
    if (!row) return undefined;
    return this.engagedDelivery(deliveryId);
  }

  /** The id of a message's delivery on `channel` inside environment `envId`. */
  async deliveryIdOf(trackingId: string, envId: string, channel: string): Promise<string | undefined> {
    const row = await this.db.selectFrom('deliveries').select('id').where('tracking_id', '=', trackingId).where('env_id', '=', envId).where('channel', '=', channel).executeTakeFirst();
    return row?.id;
  }

  /** A delivery with its message's user and notification type (read only). */
  engagedDelivery(deliveryId: string): Promise<EngagedDelivery | undefined> {
    return this.db
      .selectFrom('deliveries as d')
      .innerJoin('messages as m', 'm.tracking_id', 'd.tracking_id')
      .select(['d.id', 'd.tracking_id', 'd.account_id', 'd.env_id', 'd.channel', 'd.status', 'd.extra', 'm.user_id', 'm.notification_id'])
      .where('d.id', '=', deliveryId)
      .executeTakeFirst();
  }

  /**
   * Merges log fields (`extra`, a JSON object's text) into the delivery of each row's message on
   * its channel, in its account and environment: one statement for all rows (they travel as one
   * JSON parameter), merged as a transition merges them (mergedExtra). One row per delivery: the
   * caller merged those of the same one. A message that is gone (purged) changes nothing.
   */
  async mergeExtraByMessage(rows: ExtraByMessage[], at: string): Promise<void> {
    if (rows.length === 0) return;
    const json = JSON.stringify(rows);
    const values =
      this.dialect === 'postgres'
        ? sql`jsonb_to_recordset(${json}::jsonb) AS v(tracking_id text, channel text, account_id text, env_id text, extra text)`
        : sql`(SELECT value ->> 'tracking_id' AS tracking_id, value ->> 'channel' AS channel, value ->> 'account_id' AS account_id, value ->> 'env_id' AS env_id, value ->> 'extra' AS extra FROM json_each(${json})) AS v`;
    await sql`
      UPDATE deliveries SET extra = ${this.mergedExtra(sql.ref('deliveries.extra'), sql.ref('v.extra'))}, updated_at = ${at} FROM ${values}
      WHERE deliveries.tracking_id = v.tracking_id AND deliveries.channel = v.channel AND deliveries.account_id = v.account_id AND deliveries.env_id = v.env_id`.execute(this.db);
  }

  async setDeliveryExtra(deliveryId: string, extra: string | null, at: string): Promise<void> {
    await this.db.updateTable('deliveries').set({ extra, updated_at: at }).where('id', '=', deliveryId).execute();
  }

  // --- provider events --------------------------------------------------------------------

  async insertProviderEvent(row: ProviderEventsTable): Promise<void> {
    await this.db.insertInto('provider_events').values(row).execute();
  }

  /** The delivery a provider message id belongs to, locked for the reports applied to it. */
  deliveryByProviderIdForUpdate(channel: string, providerMessageId: string): Promise<DeliveryRow | undefined> {
    let q = this.db.selectFrom('deliveries').selectAll().where('channel', '=', channel).where('provider_message_id', '=', providerMessageId);
    if (this.lockRows) q = q.forUpdate();
    return q.executeTakeFirst();
  }

  unappliedProviderEvents(channel: string, providerMessageId: string) {
    return this.db
      .selectFrom('provider_events')
      .selectAll()
      .where('channel', '=', channel)
      .where('provider_message_id', '=', providerMessageId)
      .where('applied_at', 'is', null)
      .orderBy('at')
      .orderBy('id')
      .execute();
  }

  async markProviderEventsApplied(ids: string[], at: string): Promise<void> {
    if (ids.length === 0) return;
    await this.db.updateTable('provider_events').set({ applied_at: at }).where('id', 'in', ids).execute();
  }

  /** Deletes provider reports received before `before` (their deliveries are purged by then too). */
  async purgeProviderEventsBefore(before: string): Promise<void> {
    await this.db.deleteFrom('provider_events').where('at', '<', before).execute();
  }

  // --- delivery events --------------------------------------------------------------------

  /**
   * Takes `count` ids for an environment: increments its counter row (created at the first
   * event) and returns the last id taken. The row stays locked until the transaction ends, so
   * transactions of one environment take their ids in commit order.
   */
  async reserveEventIds(envId: string, count: number): Promise<number> {
    const row = await this.db
      .insertInto('delivery_event_counters')
      .values({ env_id: envId, last_id: count })
      .onConflict((oc) => oc.column('env_id').doUpdateSet({ last_id: sql<number>`delivery_event_counters.last_id + ${count}` }))
      .returning('last_id')
      .executeTakeFirstOrThrow();
    return Number(row.last_id);
  }

  /** Inserts events (a batch's events in one statement; measured as fast as one JSON parameter unpacked by the database). */
  async insertEvents(rows: DeliveryEventsTable[]): Promise<void> {
    await this.insertAll('delivery_events', EVENT_COLUMNS, rows);
  }

  /** Deletes up to `limit` events older than `before`; returns how many. */
  async purgeEventsBefore(before: string, limit = 5000): Promise<number> {
    const old = this.db.selectFrom('delivery_events').select(['env_id', 'id']).where('at', '<', before).orderBy('at').limit(limit).$asTuple('env_id', 'id');
    const res = await this.db
      .deleteFrom('delivery_events')
      .where((eb) => eb(eb.refTuple('env_id', 'id'), 'in', old))
      .executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}

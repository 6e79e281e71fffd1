import type SQLite from 'better-sqlite3';
import { type Kysely, type Updateable, sql } from 'kysely';
import { type Dialect, heldSqlite } from '../../storage/db.js';
import { retryDeadlock } from '../../storage/errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';
import type { TransitionRow } from './events.js';
import { ATTEMPT_ROW, DELIVERY_ROW, EVENT_ROW, type RowLayout } from './webhook-row-layouts.js';
import type {
  DeliveryRestart,
  WebhookAttemptRow,
  WebhookAttemptsTable,
  WebhookDeliveriesTable,
  WebhookDeliveryRow,
  WebhookEndpointRow,
  WebhookEndpointsTable,
  WebhookEventsTable,
  WebhookTables,
  WebhooksDb,
} from './webhooks.tables.js';
import type { DeliveryTables } from '../delivery/delivery.tables.js';
import type { SendingTables } from '../sending/sending.tables.js';

/** Rows per INSERT: well under SQLite's bound-parameter limit (16 columns at most). */
const INSERT_CHUNK = 500;

/** A pending delivery failed because its endpoint was disabled, with its event's message. */
export interface FailedPending {
  event_id: string;
  event_type: string;
  account_id: string;
  env_id: string;
  tracking_id: string | null;
}

/** A due delivery with what its attempt needs. */
export interface ClaimedDelivery {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  account_id: string;
  env_id: string;
  /** The event's message (webhook_events.tracking_id): its log gets the outcome (webhook-log-fields.ts). */
  tracking_id: string | null;
  attempts: number;
  round_attempts: number;
  restarted_by: DeliveryRestart | null;
  payload: string;
  url: string;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_secret_until: string | null;
  endpoint_updated_at: string;
  failing_since: string | null;
}

const ENABLED_ENDPOINT_COLUMNS = 'id, account_id, events, url, secret_enc, previous_secret_enc, previous_secret_until, updated_at, failing_since';

export type EnabledEndpoint = Pick<
  WebhookEndpointRow,
  'id' | 'account_id' | 'events' | 'url' | 'secret_enc' | 'previous_secret_enc' | 'previous_secret_until' | 'updated_at' | 'failing_since'
>;

export interface AttemptFilter {
  eventType?: string;
  /** true: failed attempts only; false: successful only. */
  failed?: boolean;
  /** Attempts older than this id (the previous page's cursor). */
  before?: string;
  limit: number;
}

/** The SQL of webhooks; every read and write of an endpoint's data is scoped by account and environment. */
export class WebhooksRepository {
  private readonly db: WebhooksDb;
  private readonly lockRows: boolean;
  /**
   * Inside a SQLite transaction, the connection for the hot path's prepared statements (one row
   * each, cached by SQL text) instead of Kysely building and compiling a multi-row INSERT of
   * 15-16 columns per batch (bench webhooks, CPU per delivery of the dispatch write: about
   * 35 -> 30 µs on a loaded machine; the same approach as the send journal's).
   */
  private readonly fast: SQLite.Database | null;

  constructor(
    db: Kysely<CoreTables>,
    private readonly dialect: Dialect,
    private readonly sqlite?: SQLite.Database,
  ) {
    this.db = db.withTables<WebhookTables & DeliveryTables & SendingTables>();
    this.lockRows = dialect === 'postgres';
    this.fast = heldSqlite(db, sqlite);
  }

  /** Runs `work` in a transaction, with a repository over it. */
  transaction<T>(work: (repo: WebhooksRepository) => Promise<T>): Promise<T> {
    return this.db.transaction().execute((trx) => work(new WebhooksRepository(trx as unknown as Kysely<CoreTables>, this.dialect, this.sqlite)));
  }

  /** The connection or transaction this repository runs on (the ledger's session joins the worker's transaction over it). */
  executor(): Kysely<CoreTables> {
    return this.db as unknown as Kysely<CoreTables>;
  }

  /** A repository over the caller's transaction (producers that emit events with their own writes). */
  static over(trx: Kysely<CoreTables>, dialect: Dialect, sqlite?: SQLite.Database): WebhooksRepository {
    return new WebhooksRepository(trx, dialect, sqlite);
  }

  // --- endpoints --------------------------------------------------------------------------

  async insertEndpoint(row: WebhookEndpointsTable): Promise<void> {
    await this.db.insertInto('webhook_endpoints').values(row).execute();
  }

  listEndpoints(scope: EnvScope): Promise<WebhookEndpointRow[]> {
    return this.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  findEndpoint(scope: EnvScope, id: string): Promise<WebhookEndpointRow | undefined> {
    return this.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  findSlot(scope: EnvScope, slot: string): Promise<WebhookEndpointRow | undefined> {
    return this.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('slot', '=', slot)
      .executeTakeFirst();
  }

  async updateEndpoint(scope: EnvScope, id: string, patch: Updateable<WebhookEndpointsTable>): Promise<boolean> {
    const res = await this.db
      .updateTable('webhook_endpoints')
      .set(patch)
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /**
   * Deletes an endpoint with its deliveries and attempts, in one transaction. Its row is locked
   * first (PostgreSQL), the lock the worker's recording takes too (liveEndpoints): a batch being
   * recorded either commits before the delete, whose statements then remove its attempts, or
   * waits for it and finds the endpoint gone.
   */
  /**
   * Locks the endpoint, then deletes its attempts, deliveries and itself. A worker transaction
   * that holds one of its deliveries and then writes a row referencing the endpoint (an attempt, a
   * new delivery: the foreign key takes a share lock on the endpoint's row) waits for this while
   * this waits for it; PostgreSQL aborts one. Either order of locking has such a partner (the
   * worker also locks endpoints before deliveries), so a delete chosen as the victim runs again.
   */
  deleteEndpoint(scope: EnvScope, id: string): Promise<boolean> {
    return retryDeadlock(() => this.deleteEndpointOnce(scope, id));
  }

  private deleteEndpointOnce(scope: EnvScope, id: string): Promise<boolean> {
    return this.transaction(async ({ db }) => {
      let found = db.selectFrom('webhook_endpoints').select('id').where('account_id', '=', scope.accountId).where('env_id', '=', scope.envId).where('id', '=', id);
      if (this.lockRows) found = found.forUpdate();
      if (!(await found.executeTakeFirst())) return false;
      await db.deleteFrom('webhook_attempts').where('endpoint_id', '=', id).execute();
      await db.deleteFrom('webhook_deliveries').where('endpoint_id', '=', id).execute();
      await db.deleteFrom('webhook_endpoints').where('id', '=', id).execute();
      return true;
    });
  }

  /** The enabled endpoints of an environment, with what posting to them needs (the dispatcher fans events out to them and posts). */
  enabledEndpoints(envId: string): Promise<EnabledEndpoint[]> {
    if (this.fast) return Promise.resolve(this.fast.prepare(`SELECT ${ENABLED_ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE env_id = ? AND disabled_at IS NULL`).all(envId) as EnabledEndpoint[]);
    return this.db
      .selectFrom('webhook_endpoints')
      .select(['id', 'account_id', 'events', 'url', 'secret_enc', 'previous_secret_enc', 'previous_secret_until', 'updated_at', 'failing_since'])
      .where('env_id', '=', envId)
      .where('disabled_at', 'is', null)
      .execute();
  }

  // --- dispatch ---------------------------------------------------------------------------

  /** Environments whose ledger events went past what webhooks consumed. */
  async envsWithNewEvents(): Promise<{ env_id: string; last_id: number; consumed: number }[]> {
    const rows = await this.db
      .selectFrom('delivery_event_counters as c')
      .leftJoin('webhook_cursors as w', 'w.env_id', 'c.env_id')
      .select(['c.env_id', 'c.last_id', sql<number>`coalesce(w.last_id, 0)`.as('consumed')])
      .where(sql<boolean>`c.last_id > coalesce(w.last_id, 0)`)
      .execute();
    return rows.map((r) => ({ env_id: r.env_id, last_id: Number(r.last_id), consumed: Number(r.consumed) }));
  }

  /**
   * The environment's cursor, locked for this transaction; null when another process holds it
   * (PostgreSQL: that one dispatches the environment now; SQLite serializes writers anyway).
   */
  async lockCursor(envId: string): Promise<number | null> {
    if (this.fast) {
      // SQLite serializes writers: the row needs no lock; it is made once per environment.
      const row = this.fast.prepare('SELECT last_id FROM webhook_cursors WHERE env_id = ?').get(envId) as { last_id: number } | undefined;
      if (row) return Number(row.last_id);
      this.fast.prepare('INSERT INTO webhook_cursors (env_id, last_id) VALUES (?, 0)').run(envId);
      return 0;
    }
    await this.db.insertInto('webhook_cursors').values({ env_id: envId, last_id: 0 }).onConflict((oc) => oc.column('env_id').doNothing()).execute();
    let q = this.db.selectFrom('webhook_cursors').select('last_id').where('env_id', '=', envId);
    if (this.lockRows) q = q.forUpdate().skipLocked();
    const row = await q.executeTakeFirst();
    return row ? Number(row.last_id) : null;
  }

  async setCursor(envId: string, lastId: number): Promise<void> {
    if (this.fast) {
      this.fast.prepare('UPDATE webhook_cursors SET last_id = ? WHERE env_id = ?').run(lastId, envId);
      return;
    }
    await this.db.updateTable('webhook_cursors').set({ last_id: lastId }).where('env_id', '=', envId).execute();
  }

  /**
   * The broadcast of each of these trackingIds that is a broadcast recipient's message
   * (broadcast_recipients, indexed by tracking_id), for the broadcastId of EMAIL_* events.
   */
  async broadcastsOf(trackingIds: string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    if (trackingIds.length === 0) return found;
    if (this.fast) {
      // One cached statement whatever the count (Kysely would build, compile and prepare an IN list per dispatch).
      const rows = this.fast
        .prepare('SELECT tracking_id, broadcast_id FROM broadcast_recipients WHERE tracking_id IS NOT NULL AND tracking_id IN (SELECT value FROM json_each(?))')
        .all(JSON.stringify(trackingIds)) as { tracking_id: string; broadcast_id: string }[];
      for (const r of rows) found.set(r.tracking_id, r.broadcast_id);
      return found;
    }
    const db = this.db.withTables<{ broadcast_recipients: { tracking_id: string | null; broadcast_id: string } }>();
    for (let i = 0; i < trackingIds.length; i += 500) {
      const rows = await db
        .selectFrom('broadcast_recipients')
        .select(['tracking_id', 'broadcast_id'])
        .where('tracking_id', 'is not', null)
        .where('tracking_id', 'in', trackingIds.slice(i, i + 500))
        .execute();
      for (const r of rows) found.set(r.tracking_id!, r.broadcast_id);
    }
    return found;
  }

  /** Ledger transitions after `afterId`, in order, with their message's user and type and their delivery's failure. */
  async transitionsAfter(envId: string, afterId: number, limit: number): Promise<TransitionRow[]> {
    if (this.fast) {
      return this.fast
        .prepare(
          `SELECT e.id, e.account_id, e.env_id, e.tracking_id, e.kind, e.channel, e.from_state, e.to_state, e.code, e.at, m.user_id, m.notification_id, d.failed_internal AS reason, d.extra
          FROM delivery_events e LEFT JOIN messages m ON m.tracking_id = e.tracking_id LEFT JOIN deliveries d ON d.id = e.delivery_id
          WHERE e.env_id = ? AND e.id > ? ORDER BY e.id LIMIT ?`,
        )
        .all(envId, afterId, limit) as TransitionRow[];
    }
    const rows = await this.db
      .selectFrom('delivery_events as e')
      .leftJoin('messages as m', 'm.tracking_id', 'e.tracking_id')
      .leftJoin('deliveries as d', 'd.id', 'e.delivery_id')
      .select([
        'e.id',
        'e.account_id',
        'e.env_id',
        'e.tracking_id',
        'e.kind',
        'e.channel',
        'e.from_state',
        'e.to_state',
        'e.code',
        'e.at',
        'm.user_id',
        'm.notification_id',
        'd.failed_internal as reason',
        'd.extra',
      ])
      .where('e.env_id', '=', envId)
      .where('e.id', '>', afterId)
      .orderBy('e.id')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ ...r, id: Number(r.id) }));
  }

  async insertEvents(rows: WebhookEventsTable[]): Promise<void> {
    if (this.fast && rows.length > 0) {
      insertRows(this.fast, 'webhook_events', EVENT_ROW, rows);
      return;
    }
    for (let i = 0; i < rows.length; i += INSERT_CHUNK) await this.db.insertInto('webhook_events').values(rows.slice(i, i + INSERT_CHUNK)).execute();
  }

  async insertDeliveries(rows: WebhookDeliveriesTable[]): Promise<void> {
    if (this.fast && rows.length > 0) {
      insertRows(this.fast, 'webhook_deliveries', DELIVERY_ROW, rows, ' ON CONFLICT (endpoint_id, event_id) DO NOTHING');
      return;
    }
    for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
      await this.db
        .insertInto('webhook_deliveries')
        .values(rows.slice(i, i + INSERT_CHUNK))
        .onConflict((oc) => oc.columns(['endpoint_id', 'event_id']).doNothing())
        .execute();
    }
  }

  // --- delivery ---------------------------------------------------------------------------

  /**
   * Claims up to `limit` due deliveries of enabled endpoints (not those in `skipEndpoints`):
   * their next_attempt_at moves to `leaseUntil` and their lease to `lease`, so a worker that
   * dies holding them leaves them due again then. Runs in the caller's transaction (the worker
   * records the last outcomes in the same one).
   */
  async claimDue(now: string, limit: number, skipEndpoints: string[], lease: string, leaseUntil: string): Promise<ClaimedDelivery[]> {
    if (!this.db.isTransaction) throw new Error('claimDue runs inside a transaction (its SELECT and UPDATE are one claim)');
    if (this.fast) return claimDueSqlite(this.fast, { now, limit, skip: JSON.stringify(skipEndpoints), lease, leaseUntil });
    let q = this.db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
      .innerJoin('webhook_endpoints as p', 'p.id', 'd.endpoint_id')
      .select([
        'd.id',
        'd.endpoint_id',
        'd.event_id',
        'd.event_type',
        'd.account_id',
        'd.env_id',
        'd.attempts',
        'd.round_attempts',
        'd.restarted_by',
        'e.tracking_id',
        'e.payload',
        'p.url',
        'p.secret_enc',
        'p.previous_secret_enc',
        'p.previous_secret_until',
        'p.updated_at as endpoint_updated_at',
        'p.failing_since',
      ])
      .where('d.status', '=', 'pending')
      .where('d.next_attempt_at', '<=', now)
      .where('p.disabled_at', 'is', null)
      .orderBy('d.next_attempt_at')
      .limit(limit);
    if (skipEndpoints.length > 0) q = q.where('d.endpoint_id', 'not in', skipEndpoints);
    if (this.lockRows) q = q.forUpdate('d').skipLocked();
    const rows = await q.execute();
    if (rows.length === 0) return [];
    await this.db
      .updateTable('webhook_deliveries')
      .set({ next_attempt_at: leaseUntil, lease })
      .where(
        'id',
        'in',
        rows.map((r) => r.id),
      )
      .execute();
    return rows;
  }

  /** Gives claimed deliveries back unattempted (an endpoint over its concurrency in this batch). */
  async release(ids: string[], lease: string, at: string): Promise<void> {
    if (ids.length === 0) return;
    await this.db.updateTable('webhook_deliveries').set({ next_attempt_at: at, lease: null }).where('id', 'in', ids).where('lease', '=', lease).execute();
  }

  /**
   * Those of these endpoints that still exist: deleting an endpoint while its deliveries are in
   * flight takes them and their attempts with it, and nothing else deletes a pending delivery (the
   * retention purge keeps them), so an outcome whose endpoint exists has its delivery too. One
   * lookup per endpoint of a batch, not a join per delivery. On PostgreSQL the endpoints found
   * are locked against deletion until the caller's transaction ends (FOR KEY SHARE: the lock an
   * attempt row's foreign key takes anyway, which updates of the endpoint do not wait for), so
   * the attempts inserted after this keep their foreign key.
   */
  async liveEndpoints(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    if (this.fast) {
      const rows = this.fast.prepare('SELECT id FROM webhook_endpoints WHERE id IN (SELECT value FROM json_each(?))').all(JSON.stringify(ids)) as { id: string }[];
      return new Set(rows.map((r) => r.id));
    }
    let q = this.db.selectFrom('webhook_endpoints').select('id').where('id', 'in', ids);
    if (this.lockRows) q = q.forKeyShare();
    return new Set((await q.execute()).map((r) => r.id));
  }

  async insertAttempts(rows: WebhookAttemptsTable[]): Promise<void> {
    if (this.fast && rows.length > 0) {
      insertRows(this.fast, 'webhook_attempts', ATTEMPT_ROW, rows);
      return;
    }
    for (let i = 0; i < rows.length; i += INSERT_CHUNK) await this.db.insertInto('webhook_attempts').values(rows.slice(i, i + INSERT_CHUNK)).execute();
  }

  /** Deliveries of one claim that succeeded at (about) `at`. */
  async markSucceeded(ids: string[], lease: string, at: string): Promise<void> {
    if (ids.length === 0) return;
    if (this.fast) {
      this.fast
        .prepare(
          `UPDATE webhook_deliveries SET status = 'succeeded', attempts = attempts + 1, round_attempts = round_attempts + 1, next_attempt_at = @at, lease = NULL, last_attempt_at = @at, last_error = NULL, updated_at = @at WHERE id IN (SELECT value FROM json_each(@ids)) AND lease = @lease`,
        )
        .run({ ids: JSON.stringify(ids), lease, at });
      return;
    }
    await this.db
      .updateTable('webhook_deliveries')
      .set((eb) => ({
        status: 'succeeded',
        attempts: eb('attempts', '+', 1),
        round_attempts: eb('round_attempts', '+', 1),
        next_attempt_at: at,
        lease: null,
        last_attempt_at: at,
        last_error: null,
        updated_at: at,
      }))
      .where('id', 'in', ids)
      .where('lease', '=', lease)
      .execute();
  }

  /** Records an attempt's outcome on its delivery, if the claim that made it still holds it. */
  async settleDelivery(id: string, lease: string, patch: Updateable<WebhookDeliveriesTable>): Promise<boolean> {
    const res = await this.db.updateTable('webhook_deliveries').set(patch).where('id', '=', id).where('lease', '=', lease).executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  endpointsHealth(ids: string[]): Promise<Pick<WebhookEndpointRow, 'id' | 'failing_since' | 'disabled_at'>[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('webhook_endpoints').select(['id', 'failing_since', 'disabled_at']).where('id', 'in', ids).execute();
  }

  async setEndpointHealth(id: string, patch: Pick<Updateable<WebhookEndpointsTable>, 'failing_since' | 'disabled_at' | 'disabled_reason'>): Promise<void> {
    await this.db.updateTable('webhook_endpoints').set(patch).where('id', '=', id).execute();
  }

  /**
   * Fails an endpoint's pending deliveries (it was disabled); recovery can send them again.
   * Answers the failed deliveries' events with their messages, for those messages' logs.
   */
  async failPending(endpointId: string, reason: string, at: string): Promise<FailedPending[]> {
    const failed = await this.db
      .updateTable('webhook_deliveries')
      .set({ status: 'failed', lease: null, last_error: reason, updated_at: at })
      .where('endpoint_id', '=', endpointId)
      .where('status', '=', 'pending')
      .returning(['event_id', 'event_type', 'account_id', 'env_id'])
      .execute();
    const trackingIds = new Map<string, string | null>();
    for (let i = 0; i < failed.length; i += 500) {
      const ids = failed.slice(i, i + 500).map((f) => f.event_id);
      for (const e of await this.db.selectFrom('webhook_events').select(['id', 'tracking_id']).where('id', 'in', ids).execute()) trackingIds.set(e.id, e.tracking_id);
    }
    return failed.map((f) => ({ ...f, tracking_id: trackingIds.get(f.event_id) ?? null }));
  }

  // --- attempts, replay, recovery ---------------------------------------------------------

  listAttempts(scope: EnvScope, endpointId: string, filter: AttemptFilter): Promise<WebhookAttemptRow[]> {
    let q = this.db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('endpoint_id', '=', endpointId);
    if (filter.eventType) q = q.where('event_type', '=', filter.eventType);
    if (filter.failed !== undefined) q = q.where('success', '=', filter.failed ? 0 : 1);
    if (filter.before) q = q.where('id', '<', filter.before);
    return q.orderBy('id', 'desc').limit(filter.limit).execute();
  }

  findEvent(scope: EnvScope, eventId: string) {
    return this.db
      .selectFrom('webhook_events')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('id', '=', eventId)
      .executeTakeFirst();
  }

  findDelivery(endpointId: string, eventId: string): Promise<WebhookDeliveryRow | undefined> {
    return this.db.selectFrom('webhook_deliveries').selectAll().where('endpoint_id', '=', endpointId).where('event_id', '=', eventId).executeTakeFirst();
  }

  /**
   * Makes a delivery due now with a fresh schedule (a replay), if it is still as `seen`: of
   * replays that read the same state, one restarts it, and none takes over a claim made since
   * (a claim moves next_attempt_at and sets the lease; an attempt recorded moves attempts).
   */
  async restartDelivery(seen: Pick<WebhookDeliveryRow, 'id' | 'status' | 'attempts' | 'lease' | 'next_attempt_at'>, at: string, by: DeliveryRestart): Promise<boolean> {
    const res = await this.db
      .updateTable('webhook_deliveries')
      .set({ status: 'pending', round_attempts: 0, next_attempt_at: at, lease: null, restarted_by: by, updated_at: at })
      .where('id', '=', seen.id)
      .where('status', '=', seen.status)
      .where('attempts', '=', seen.attempts)
      .where('next_attempt_at', '=', seen.next_attempt_at)
      .where('lease', seen.lease === null ? 'is' : '=', seen.lease)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Makes every failed delivery of an endpoint created since `since` due now with a fresh schedule; returns how many. */
  async restartFailedSince(scope: EnvScope, endpointId: string, since: string, at: string): Promise<number> {
    const res = await this.db
      .updateTable('webhook_deliveries')
      .set({ status: 'pending', round_attempts: 0, next_attempt_at: at, lease: null, restarted_by: 'recover', updated_at: at })
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('endpoint_id', '=', endpointId)
      // A literal, so that both planners see the condition of the partial index webhook_deliveries_failed.
      .where('status', '=', sql.lit('failed'))
      .where('created_at', '>=', since)
      .executeTakeFirst();
    return Number(res.numUpdatedRows);
  }

  /** Deletes webhook events, deliveries and attempts older than `before` (the log retention). */
  async purgeBefore(before: string): Promise<void> {
    await this.db.deleteFrom('webhook_attempts').where('at', '<', before).execute();
    await this.db.deleteFrom('webhook_deliveries').where('created_at', '<', before).where('status', '!=', 'pending').execute();
    await this.db
      .deleteFrom('webhook_events')
      .where('created_at', '<', before)
      .where((eb) => eb.not(eb.exists(eb.selectFrom('webhook_deliveries as d').select('d.id').whereRef('d.event_id', '=', 'webhook_events.id'))))
      .execute();
  }
}

/**
 * claimDue on SQLite inside its transaction: the same SELECT and UPDATE as the Kysely form, as
 * two cached prepared statements whose text does not vary with the batch (the ids and the
 * skipped endpoints go in as JSON arrays), so a claim neither builds nor compiles SQL
 * (bench webhooks: Kysely's build and compile of the join were most of a claim's CPU).
 */
function claimDueSqlite(
  sqlite: SQLite.Database,
  args: { now: string; limit: number; skip: string; lease: string; leaseUntil: string },
): ClaimedDelivery[] {
  const rows = sqlite
    .prepare(
      `SELECT d.id, d.endpoint_id, d.event_id, d.event_type, d.account_id, d.env_id, d.attempts, d.round_attempts, d.restarted_by, e.tracking_id, e.payload, p.url, p.secret_enc,
        p.previous_secret_enc, p.previous_secret_until, p.updated_at AS endpoint_updated_at, p.failing_since
      FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id JOIN webhook_endpoints p ON p.id = d.endpoint_id
      WHERE d.status = 'pending' AND d.next_attempt_at <= @now AND p.disabled_at IS NULL AND d.endpoint_id NOT IN (SELECT value FROM json_each(@skip))
      ORDER BY d.next_attempt_at LIMIT @limit`,
    )
    .all({ now: args.now, skip: args.skip, limit: args.limit }) as ClaimedDelivery[];
  if (rows.length === 0) return rows;
  sqlite
    .prepare(`UPDATE webhook_deliveries SET next_attempt_at = @leaseUntil, lease = @lease WHERE id IN (SELECT value FROM json_each(@ids))`)
    .run({ leaseUntil: args.leaseUntil, lease: args.lease, ids: JSON.stringify(rows.map((r) => r.id)) });
  return rows;
}

/** Rows per INSERT statement run on SQLite, largest first: a batch of 30 is 6 runs (16 + 3 x 4 + 2 x 1), each text prepared once. */
const ROWS_PER_RUN = [16, 4, 1];

/**
 * Inserts rows with a few runs of cached prepared statements of several rows each (ROWS_PER_RUN),
 * the values passed as positional arguments in the layout's column order. Named parameters cost
 * better-sqlite3 a property lookup per value from C++, an array argument an element read per
 * value (about 430 instructions each), and every run a result object and SQLite's statement
 * set-up and reset; arguments and multi-row runs cost none of that per row (callgrind, bench
 * webhook-instructions). The layout's writer reads each row's values (webhook-row-layouts.ts).
 */
function insertRows<Row>(sqlite: SQLite.Database, table: string, layout: RowLayout<Row>, rows: Row[], suffix = ''): void {
  const width = layout.columns.length;
  const tuple = `(${layout.columns.map(() => '?').join(', ')})`;
  let at = 0;
  for (const size of ROWS_PER_RUN) {
    if (rows.length - at < size) continue;
    const insert = sqlite.prepare(`INSERT INTO ${table} (${layout.columns.join(', ')}) VALUES ${new Array<string>(size).fill(tuple).join(', ')}${suffix}`);
    const values: unknown[] = new Array(size * width);
    for (; rows.length - at >= size; at += size) {
      for (let r = 0; r < size; r++) layout.write(rows[at + r], values, r * width);
      insert.run(...values);
    }
  }
}

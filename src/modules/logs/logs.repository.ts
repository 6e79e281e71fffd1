import { type Kysely, PostgresAdapter, type Selectable, sql } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { LogQueriesTable } from '../sending/sending.tables.js';
import type { DeliveryEventsTable, DeliveryTables } from '../delivery/delivery.tables.js';
import type { LogDelivery, LogMessage } from './log-record.js';
import type { LogsDb, LogsTables } from './logs.tables.js';

export interface LogFilters {
  accountId: string;
  /** null: every environment of the account; []: none. */
  envIds: string[] | null;
  from: string | null;
  to: string | null;
  userId: string | null;
  notificationIds: string[] | null;
  /** Any of these users (the older server SDK's list form of userFilter). */
  userIds?: string[] | null;
  /** Only these sends (the older server SDK's trackingIds). */
  trackingIds?: string[] | null;
}

/** How a log read takes message rows (LogsService's LogLimits). */
export interface MessageRead {
  /** Characters of each request body read (LogMessage.request). */
  requestChars: number;
  /** SQLite: request body bytes one statement reads through (readInRuns). */
  readBytes: number;
}

/** Where a page of messages (newest first) ended: the next page starts after it. */
export interface MessageCursor {
  received_at: string;
  tracking_id: string;
}

/** Rows per insert of a query's result: 4 parameters each, far below either engine's cap. */
const RESULT_INSERT_CHUNK = 500;

/**
 * While a query is Running, its `error` column names the attempt of the job run in progress
 * ("run 2"), so the next run can tell that one never ended (LogsService.runQuery). Once
 * Complete, `error` is why the result is not whole (null when whole); once Failed, why it failed.
 */
const RUN_PREFIX = 'run ';

export class LogsRepository {
  private readonly db: LogsDb;
  private readonly postgres: boolean;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<LogsTables>();
    this.postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  }

  insertQuery(row: Selectable<LogQueriesTable>): Promise<unknown> {
    return this.db.insertInto('log_queries').values(row).execute();
  }

  /** A query as its caller sees it: same account and same environment (null: an account-wide caller). */
  findQuery(accountId: string, envId: string, id: string): Promise<Selectable<LogQueriesTable> | undefined> {
    return this.db
      .selectFrom('log_queries')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  findQueryForWork(id: string): Promise<Selectable<LogQueriesTable> | undefined> {
    return this.db.selectFrom('log_queries').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** Notes on a Running query that the job's run `attempt` is in progress. */
  async markRun(id: string, attempt: number): Promise<void> {
    await this.db.updateTable('log_queries').set({ error: `${RUN_PREFIX}${attempt}` }).where('id', '=', id).where('status', '=', 'Running').execute();
  }

  /** Clears markRun's note: the run ended (with an error the queue retries). */
  async clearRun(id: string): Promise<void> {
    await this.db.updateTable('log_queries').set({ error: null }).where('id', '=', id).where('status', '=', 'Running').execute();
  }

  /** The attempt markRun noted on a Running query, or null. */
  static runOf(row: Pick<Selectable<LogQueriesTable>, 'status' | 'error'>): number | null {
    if (row.status !== 'Running' || !row.error?.startsWith(RUN_PREFIX)) return null;
    const attempt = Number(row.error.slice(RUN_PREFIX.length));
    return Number.isSafeInteger(attempt) ? attempt : null;
  }

  /**
   * Stores the result and marks the query Complete in one transaction, with `note` saying why
   * the result is not whole (null: it is). A rerun (at-least-once jobs) replaces the rows; a
   * query no longer Running is left as it is.
   */
  async completeQuery(id: string, accountId: string, logs: string[], at: string, note: string | null = null): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const done = await trx
        .updateTable('log_queries')
        .set({ status: 'Complete', result: null, error: note, completed_at: at })
        .where('id', '=', id)
        .where('status', '=', 'Running')
        .executeTakeFirst();
      if (Number(done.numUpdatedRows) === 0) return;
      await trx.deleteFrom('log_query_results').where('query_id', '=', id).execute();
      for (let i = 0; i < logs.length; i += RESULT_INSERT_CHUNK) {
        const rows = logs.slice(i, i + RESULT_INSERT_CHUNK).map((log, j) => ({ query_id: id, account_id: accountId, position: i + j, log }));
        await trx.insertInto('log_query_results').values(rows).execute();
      }
    });
  }

  async failQuery(id: string, error: string, at: string): Promise<void> {
    await this.db.updateTable('log_queries').set({ status: 'Failed', error, completed_at: at }).where('id', '=', id).where('status', '=', 'Running').execute();
  }

  /** Stored logs of a query from `position` on, at most `limit`. */
  async resultPage(accountId: string, queryId: string, position: number, limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom('log_query_results')
      .select('log')
      .where('account_id', '=', accountId)
      .where('query_id', '=', queryId)
      .where('position', '>=', position)
      .orderBy('position')
      .limit(limit)
      .execute();
    return rows.map((r) => r.log);
  }

  async purgeQueriesBefore(before: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const old = trx.selectFrom('log_queries').select('id').where('created_at', '<', before);
      await trx.deleteFrom('log_query_results').where('query_id', 'in', old).execute();
      await trx.deleteFrom('log_queries').where('created_at', '<', before).execute();
    });
  }

  /** The environment's ledger transitions, newest first, from before the event id `before` (null: the newest). */
  events(accountId: string, envId: string, before: number | null, limit: number): Promise<Selectable<DeliveryEventsTable>[]> {
    let q = this.db
      .withTables<DeliveryTables>()
      .selectFrom('delivery_events')
      .selectAll()
      .where('env_id', '=', envId)
      .where('account_id', '=', accountId);
    if (before !== null) q = q.where('id', '<', before);
    return q.orderBy('id', 'desc').limit(limit).execute();
  }

  /** Messages matching the filters (all combined with AND), newest first, after `after` (null: from the newest). */
  async findMessages(f: LogFilters, limit: number, read: MessageRead, after: MessageCursor | null = null): Promise<LogMessage[]> {
    let q = this.db.selectFrom('messages').where('account_id', '=', f.accountId);
    if (f.envIds) {
      if (f.envIds.length === 0) return [];
      q = q.where('env_id', 'in', f.envIds);
    }
    if (f.from) q = q.where('received_at', '>=', f.from);
    if (f.to) q = q.where('received_at', '<=', f.to);
    if (f.userId) q = q.where('user_id', '=', f.userId);
    if (f.userIds?.length) q = q.where('user_id', 'in', f.userIds);
    if (f.trackingIds?.length) q = q.where('tracking_id', 'in', f.trackingIds);
    if (f.notificationIds) q = q.where('notification_id', 'in', f.notificationIds);
    if (after) {
      // The plain bound lets either engine range-scan its received_at index.
      q = q
        .where('received_at', '<=', after.received_at)
        .where((eb) => eb.or([eb('received_at', '<', after.received_at), eb('tracking_id', '<', after.tracking_id)]));
    }
    q = q.orderBy('received_at', 'desc').orderBy('tracking_id', 'desc').limit(limit);
    if (this.postgres) return q.select(messageColumns(read.requestChars)).execute();
    // On SQLite received_at comes from the index the search walks: finding reads no body.
    return this.readInRuns(f.accountId, await q.select(['tracking_id', requestBytes]).execute(), read);
  }

  /** The account's messages of these ids, newest first. */
  async messagesByIds(accountId: string, trackingIds: string[], read: MessageRead): Promise<LogMessage[]> {
    if (trackingIds.length === 0) return [];
    const q = this.db.selectFrom('messages').where('account_id', '=', accountId).where('tracking_id', 'in', trackingIds);
    if (this.postgres) return q.select(messageColumns(read.requestChars)).orderBy('received_at', 'desc').orderBy('tracking_id', 'desc').execute();
    // Through the primary key, so without received_at (past the body): the rows are ordered once read.
    const rows = await this.readInRuns(accountId, await q.select(['tracking_id', requestBytes]).execute(), read);
    return rows.sort(newestFirst);
  }

  /**
   * SQLite: these messages, in the keys' order, read in runs whose request bodies add up to at
   * most readBytes (a longer one alone), with a turn of the event loop between runs. SQLite
   * reads a row's columns after `request` by walking the body's overflow pages (about 9 ms for
   * 21 MB, measured), synchronously; octet_length it answers without the body.
   */
  private async readInRuns(accountId: string, keys: { tracking_id: string; request_bytes: number }[], read: MessageRead): Promise<LogMessage[]> {
    const byId = new Map<string, LogMessage>();
    for (const [i, run] of byRequestBytes(keys, read.readBytes).entries()) {
      if (i > 0) await nextTurn();
      const rows = await this.db
        .selectFrom('messages')
        .select(messageColumns(read.requestChars))
        .where('account_id', '=', accountId)
        .where('tracking_id', 'in', run.map((k) => k.tracking_id))
        .execute();
      for (const row of rows) byId.set(row.tracking_id, row);
    }
    // A message purged since it was found is left out.
    return keys.flatMap((k) => byId.get(k.tracking_id) ?? []);
  }

  /** Of these messages, those whose request body contains any of `texts` (case-sensitive, as String.includes). */
  async requestsContaining(accountId: string, trackingIds: string[], texts: string[]): Promise<Set<string>> {
    if (trackingIds.length === 0 || texts.length === 0) return new Set();
    // SQLite's LIKE ignores ASCII case; instr and strpos compare exactly.
    const contains = (text: string) => (this.postgres ? sql<boolean>`strpos(request, ${text}) > 0` : sql<boolean>`instr(request, ${text}) > 0`);
    const rows = await this.db
      .selectFrom('messages')
      .select('tracking_id')
      .where('account_id', '=', accountId)
      .where('tracking_id', 'in', trackingIds)
      .where(sql<boolean>`(${sql.join(texts.map(contains), sql` OR `)})`)
      .execute();
    return new Set(rows.map((r) => r.tracking_id));
  }

  /** The deliveries of these messages, without their rendered content. */
  deliveriesOf(accountId: string, trackingIds: string[]): Promise<LogDelivery[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('deliveries')
      .select([
        'id', 'tracking_id', 'account_id', 'env_id', 'channel', 'routing', 'routing_reason', 'status', 'preview', 'attempts', 'sent_at',
        'delivered_at', 'failed_at', 'failed_code', 'failed_internal', 'provider_message_id', 'extra', 'created_at', 'updated_at',
      ])
      .where('account_id', '=', accountId)
      .where('tracking_id', 'in', trackingIds)
      .execute();
  }
}

const requestBytes = sql<number>`octet_length(request)`.as('request_bytes');

/** A message row as a log reads it: at most the first `requestChars` characters of its body, with the body's size. */
function messageColumns(requestChars: number) {
  return [
    'tracking_id', 'account_id', 'env_id', 'notification_id', 'user_id', 'user_email', 'user_number', 'template_id', 'sub_notification_id',
    'state', 'job_id', 'ip', 'agent', 'received_at', 'processed_at', 'scheduled_for', 'schedule_updated_at', 'schedule_updated_to',
    'schedule_deleted_at', 'failed_at', 'failed_code', 'failed_internal', 'skipped',
    sql<string>`substr(request, 1, ${requestChars})`.as('request'),
    requestBytes,
  ] as const;
}

/** Newest first, as the searches order: by received_at, then tracking id. */
export function newestFirst(a: { received_at: string; tracking_id: string }, b: { received_at: string; tracking_id: string }): number {
  if (a.received_at !== b.received_at) return a.received_at < b.received_at ? 1 : -1;
  return a.tracking_id < b.tracking_id ? 1 : a.tracking_id > b.tracking_id ? -1 : 0;
}

/** Lets pending I/O run before the next statement (setImmediate: after I/O callbacks, unlike a resolved promise). */
export const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Consecutive runs of rows whose request bodies add up to at most `bytes` (a longer one alone). */
export function byRequestBytes<T extends { request_bytes: number }>(rows: T[], bytes: number): T[][] {
  const runs: T[][] = [];
  let run: T[] = [];
  let size = 0;
  for (const row of rows) {
    if (run.length > 0 && size + row.request_bytes > bytes) {
      runs.push(run);
      run = [];
      size = 0;
    }
    run.push(row);
    size += row.request_bytes;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

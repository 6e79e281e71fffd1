import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../errors.js';
import { type JobContext, PermanentJobError, type Queue } from '../../queue/port.js';
import { INTEGER_COLUMN_MAX } from '../../storage/schema.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import { SEND_CHANNELS } from '../sending/channels.js';
import { MessagesRepository } from '../sending/messages.repository.js';
import type { AttemptRow } from '../sending/sending.tables.js';
import { type LogEvent, decodeCursor, encodeCursor, toLogEvent } from './log-events.js';
import { LOG_REQUEST_CHARS, type LogDelivery, type LogMessage, type LogRecord, logStatus, toLogRecord } from './log-record.js';
import { type LogFilters, LogsRepository, type MessageCursor, byRequestBytes, newestFirst, nextTurn } from './logs.repository.js';

/**
 * The spec's log filter channels, as the channel enum and as log names: the send channels and
 * VOICE, whose calls have no delivery yet (the voice operations are not built), so it is
 * accepted and matches nothing.
 */
const FILTER_CHANNEL_NAMES: readonly { channel: string; log: string }[] = [...SEND_CHANNELS, { channel: 'VOICE', log: 'voice' }];
export const FILTER_CHANNELS: readonly string[] = FILTER_CHANNEL_NAMES.map((c) => c.log);

/** A filter channel given in the channel enum (EMAIL, VOICE, ...) as its log name; anything else as given. */
export function filterChannelLogName(channel: string): string {
  return FILTER_CHANNEL_NAMES.find((c) => c.channel === channel)?.log ?? channel;
}

export const MAX_TRACKING_IDS = 25;
/** GET /logs/tail: the SDK's "last 100 logs". */
export const TAIL_SIZE = 100;
export const DEFAULT_EVENTS_PAGE = 100;
export const MAX_EVENTS_PAGE = 1000;
/** Tracking ids are UUIDs (36 characters); anything much longer is not one. */
export const MAX_TRACKING_ID_LENGTH = 64;
/** Items per list filter of a log query, and characters per filter string. */
export const MAX_FILTER_ITEMS = 100;
export const MAX_FILTER_LENGTH = 256;
/** The last instant an ISO-8601 date with a 4-digit year (as stored) can hold: 9999-12-31T23:59:59.999Z. */
export const MAX_TIMESTAMP_MS = 253_402_300_799_999;
/** Logs per page of GET /logs/query/{queryId} (also its default). */
export const MAX_RESULT_PAGE = 1000;
/**
 * Runs of a query job: a search that failed twice will fail again, and each retry keeps its
 * poller waiting on Running.
 */
const QUERY_ATTEMPTS = 3;
/**
 * A query still Running this long after it started is answered Failed. Covers what onFailed
 * cannot see: on PostgreSQL, pg-boss fails a job itself when its worker died on the last attempt.
 */
export const QUERY_DEADLINE_MS = 3600_000;
/** Why a query failed, as its poller reads it; the cause is in the worker's log. */
const QUERY_FAILED = 'The search failed. Start it again, with narrower filters if it keeps failing.';
/** Why a query whose run never ended failed (runQuery). */
export const QUERY_RUN_LOST =
  'The search stopped without finishing (the server stopped while it ran), and is not run again. Start it again, with narrower filters (e.g. a shorter dateRangeFilter) if it keeps failing.';
/** A query answers at most this many logs, newest first. */
export const MAX_QUERY_RESULTS = 5000;
/** A query looks at most this many of the newest matching messages (its status, channel and request filters are applied to them). */
const MAX_QUERY_CANDIDATES = MAX_QUERY_RESULTS * 4;

/**
 * What a log read may hold in memory. A tenant's sends may carry bodies of tens of megabytes
 * (up to the body limit), thousands of them: no read may take memory in proportion to them.
 */
export interface LogLimits {
  /** Characters of a send's request body a log record carries; a longer one is cut, with a marker (log-record.ts). */
  requestChars: number;
  /** Characters of JSON a query's stored result may hold; the search stops before the log that would pass it, and the result says it is truncated. */
  resultChars: number;
  /** Messages a query reads per statement. */
  searchPage: number;
  /**
   * Bytes of request bodies one statement reads through (message rows on SQLite, requestFilter):
   * SQLite reaches a row's columns after its body by walking the body's pages, on the event loop.
   */
  readBytes: number;
}

export const LOG_LIMITS: LogLimits = {
  requestChars: LOG_REQUEST_CHARS,
  // 5,000 ordinary logs are a few MB; the cap only stops results of large requests.
  resultChars: 32 * 1024 * 1024,
  searchPage: 500,
  readBytes: 32 * 1024 * 1024,
};
export const LOG_QUERY_JOB = 'logs.query';
export const LOG_STATUSES = ['scheduled', 'canceled', 'processing', 'failed', 'sent', 'delivered', 'skipped', 'retracted'] as const;

export interface LogQueryInput {
  dateRangeFilter?: number[];
  /** One user, or (older server SDK) any of several. */
  userFilter?: string | string[];
  envIdFilter?: string[];
  /** One status, or (older server SDK) any of several. */
  statusFilter?: string | string[];
  channelFilter?: string[];
  notificationFilter?: string[];
  /** Older server SDK: only these sends. */
  trackingIds?: string[];
  /** Older server SDK: sends whose request body contains any of these strings. */
  requestFilter?: string[];
}

/** What a stored query keeps beside its LogFilters: the filters applied to each log, not in SQL. */
interface StoredFilters extends LogFilters {
  rawStatus: string | null;
  rawStatuses?: string[] | null;
  rawChannels: string[] | null;
  requestContains?: string[] | null;
}

/** Unix timestamps in seconds (as the SDK sends), also accepted in milliseconds (any value over 1e12). */
const toMs = (ts: number) => (ts > 1e12 ? ts : ts * 1000);
const toIso = (ts: number) => new Date(toMs(ts)).toISOString();

export class LogsService {
  private readonly messages: MessagesRepository;
  private readonly repo: LogsRepository;
  private readonly limits: LogLimits;

  constructor(
    private readonly deps: Deps,
    private readonly queue: Queue,
    limits: Partial<LogLimits> = {},
  ) {
    this.messages = new MessagesRepository(deps.db);
    this.repo = new LogsRepository(deps.db);
    this.limits = { ...LOG_LIMITS, ...limits };
  }

  async byTrackingIds(auth: AuthContext, trackingIds: string[]): Promise<LogRecord[]> {
    // Tracking ids are UUIDs, written in lower case; a UUID read back in upper case is the same id (RFC 9562).
    const ids = [...new Set(trackingIds.map((s) => s.trim().toLowerCase()).filter(Boolean))];
    if (ids.length === 0) throw invalid('No tracking id given.', 'Pass one or more trackingIds, comma separated.');
    if (ids.length > MAX_TRACKING_IDS) throw tooManyTrackingIds(ids.length);
    if (ids.some((id) => id.length > MAX_TRACKING_ID_LENGTH)) {
      throw invalid(`A tracking id is at most ${MAX_TRACKING_ID_LENGTH} characters.`, 'Pass the trackingId a send answered.');
    }
    const envId = requireEnv(auth);
    const rows = await this.repo.messagesByIds(auth.accountId, ids, this.limits);
    if (rows.length < ids.length) {
      // Sends accepted a moment ago may not be rows yet (SQLite's intake journal): read as the
      // sending module holds them, whole, as few as the ids not found (at most 25).
      const found = new Set(rows.map((m) => m.tracking_id));
      for (const m of await this.messages.messagesByIds(auth.accountId, ids.filter((id) => !found.has(id)))) {
        if (!found.has(m.tracking_id)) rows.push({ ...m, request_bytes: Buffer.byteLength(m.request) });
      }
      rows.sort(newestFirst);
    }
    return this.records(rows.filter((m) => m.env_id === envId));
  }

  /** GET /logs: the environment's delivery events, newest first, in pages linked by a cursor. */
  async events(auth: AuthContext, input: { limit?: number; cursor?: string }): Promise<{ messages: LogEvent[]; nextCursor?: string }> {
    const before = decodeCursor(input.cursor);
    const limit = input.limit ?? DEFAULT_EVENTS_PAGE;
    // One more than the page tells whether another page follows.
    const rows = await this.repo.events(auth.accountId, requireEnv(auth), before, limit + 1);
    const page = rows.slice(0, limit);
    return { messages: page.map(toLogEvent), ...(rows.length > limit ? { nextCursor: encodeCursor(page[page.length - 1].id) } : {}) };
  }

  /** GET /logs/tail: the environment's newest log records (sends accepted up to now included). */
  async tail(auth: AuthContext): Promise<LogRecord[]> {
    const envId = requireEnv(auth);
    await this.messages.flushAccepted();
    const filters = { accountId: auth.accountId, envIds: [envId], from: null, to: null, userId: null, notificationIds: null };
    return this.records(await this.repo.findMessages(filters, TAIL_SIZE, this.limits));
  }

  async startQuery(auth: AuthContext, input: LogQueryInput): Promise<string> {
    const filters = this.filters(auth, input);
    const id = this.deps.ids.uuid();
    await this.deps.db.transaction().execute(async (trx) => {
      await new LogsRepository(trx).insertQuery({
        id,
        account_id: auth.accountId,
        env_id: requireEnv(auth),
        filters: JSON.stringify(filters),
        status: 'Running',
        result: null,
        error: null,
        created_at: this.deps.clock.now().toISOString(),
        completed_at: null,
      });
      await this.queue.enqueue(trx, LOG_QUERY_JOB, { queryId: id }, { maxAttempts: QUERY_ATTEMPTS });
    });
    return id;
  }

  /**
   * One page of a query's stored result. `nextToken` (opaque; today the position of the next
   * log) is present while more logs follow. The result was computed once, by the job.
   */
  async queryResult(
    auth: AuthContext,
    queryId: string,
    page: { limit?: number; nextToken?: string } = {},
  ): Promise<{ status: string; logs?: LogRecord[]; nextToken?: string; error?: string }> {
    const row = await this.repo.findQuery(auth.accountId, requireEnv(auth), queryId);
    if (!row) throw notFound('Log query', queryId, 'Start one with POST /logs/query.');
    if (row.status === 'Running') {
      if (this.deps.clock.now().getTime() - new Date(row.created_at).getTime() <= QUERY_DEADLINE_MS) return { status: 'Running' };
      await this.failQuery(row.id);
      // Read again: the job may have finished it just now.
      return this.queryResult(auth, queryId, page);
    }
    if (row.status === 'Failed') return { status: 'Failed', error: row.error ?? QUERY_FAILED };
    const limit = Math.min(page.limit ?? MAX_RESULT_PAGE, MAX_RESULT_PAGE);
    const start = page.nextToken === undefined ? 0 : Number(page.nextToken);
    if (!Number.isSafeInteger(start) || start < 0 || start > INTEGER_COLUMN_MAX) throw invalid('nextToken is not one this query gave.', 'Pass the nextToken of the previous page, or none for the first.');
    // Finished before results had their own rows (migration 0067): the whole result is one JSON array.
    const logs: LogRecord[] = row.result !== null
      ? (JSON.parse(row.result) as LogRecord[]).slice(start, start + limit + 1)
      : (await this.repo.resultPage(auth.accountId, row.id, start, limit + 1)).map((log) => JSON.parse(log) as LogRecord);
    const more = logs.length > limit;
    return {
      status: 'Complete',
      logs: more ? logs.slice(0, limit) : logs,
      ...(more ? { nextToken: String(start + limit) } : {}),
      // Cut short by resultChars (runQuery): said on every page, in the SDK model's `message`.
      ...(row.error ? { truncated: true, message: row.error } : {}),
    };
  }

  /** onFailed of the query job: a query whose job failed for good answers Failed, not Running forever. */
  async failQuery(queryId: string): Promise<void> {
    await this.repo.failQuery(queryId, QUERY_FAILED, this.deps.clock.now().toISOString());
  }

  /**
   * The job: runs a stored query and stores its result. With the job's context, a run whose
   * previous attempt began and never ended (its process died: killed, out of memory) marks the
   * query Failed instead of searching again: whatever stopped that run would stop this one, and
   * each restart would run it again.
   */
  async runQuery(queryId: string, job?: Pick<JobContext, 'attempt'>): Promise<void> {
    const row = await this.repo.findQueryForWork(queryId);
    if (!row || row.status !== 'Running') return;
    let stored: StoredFilters;
    try {
      stored = JSON.parse(row.filters) as StoredFilters;
    } catch {
      throw new PermanentJobError(`log query ${queryId}: stored filters are not JSON`);
    }
    if (job) {
      // The same attempt again is a run the queue gave back at a stop without counting it.
      const previous = LogsRepository.runOf(row);
      if (previous !== null && previous < job.attempt) {
        this.deps.logger.warn({ queryId, attempt: job.attempt }, 'log query: the previous run never ended; marked Failed, not run again');
        await this.repo.failQuery(queryId, QUERY_RUN_LOST, this.deps.clock.now().toISOString());
        return;
      }
      await this.repo.markRun(queryId, job.attempt);
    }
    try {
      const { logs, truncated } = await this.search(row.account_id, stored);
      const note = truncated
        ? `The result stops at ${logs.length} logs: the next would pass the ${this.limits.resultChars} characters a stored result holds. Narrow the filters (e.g. dateRangeFilter) to see the rest.`
        : null;
      await this.repo.completeQuery(queryId, row.account_id, logs, this.deps.clock.now().toISOString(), note);
    } catch (err) {
      // An error ends this run: the queue's retry is a run of its own, not one that was lost.
      if (job) await this.repo.clearRun(queryId).catch(() => undefined);
      throw err;
    }
  }

  /**
   * The logs of a query, newest first, as JSON, read a page of messages at a time: at most
   * MAX_QUERY_RESULTS logs, from the newest MAX_QUERY_CANDIDATES matching messages, and at most
   * resultChars characters in all (`truncated` when a log was left out for it).
   */
  private async search(accountId: string, stored: StoredFilters): Promise<{ logs: string[]; truncated: boolean }> {
    // Every send accepted before the query is a row of messages once this returns.
    await this.messages.flushAccepted();
    const logs: string[] = [];
    let chars = 0;
    let scanned = 0;
    let after: MessageCursor | null = null;
    while (logs.length < MAX_QUERY_RESULTS && scanned < MAX_QUERY_CANDIDATES) {
      // On SQLite every statement runs on the event loop: let API requests in between pages.
      if (after) await nextTurn();
      const want = Math.min(this.limits.searchPage, MAX_QUERY_CANDIDATES - scanned);
      const page = await this.repo.findMessages(stored, want, this.limits, after);
      if (page.length === 0) break;
      scanned += page.length;
      after = page[page.length - 1];
      const byMessage = groupBy(await this.repo.deliveriesOf(accountId, page.map((m) => m.tracking_id)), (d) => d.tracking_id);
      let matches = page.filter((message) => {
        const own = byMessage.get(message.tracking_id) ?? [];
        if (stored.rawStatus && logStatus(message, own) !== stored.rawStatus) return false;
        if (stored.rawStatuses?.length && !stored.rawStatuses.includes(logStatus(message, own))) return false;
        if (stored.rawChannels?.length && !own.some((d) => d.routing === 'SEND' && stored.rawChannels!.includes(d.channel))) return false;
        return true;
      });
      if (stored.requestContains?.length) matches = await this.withRequestContaining(matches, stored.requestContains);
      for (const record of await this.recordsOf(matches.slice(0, MAX_QUERY_RESULTS - logs.length), byMessage)) {
        const json = JSON.stringify(record);
        if (chars + json.length > this.limits.resultChars) return { logs, truncated: true };
        chars += json.length;
        logs.push(json);
      }
      if (page.length < want) break;
    }
    return { logs, truncated: false };
  }

  /** Of these messages, those whose request body contains any of `texts`: the long bodies compared by the database, a few at a time. */
  private async withRequestContaining(rows: LogMessage[], texts: string[]): Promise<LogMessage[]> {
    const cut = rows.filter((m) => !isWhole(m));
    const matching = new Set<string>();
    for (const [i, run] of byRequestBytes(cut, this.limits.readBytes).entries()) {
      if (i > 0) await nextTurn();
      for (const id of await this.repo.requestsContaining(run[0].account_id, run.map((m) => m.tracking_id), texts)) matching.add(id);
    }
    return rows.filter((m) => (isWhole(m) ? texts.some((text) => m.request.includes(text)) : matching.has(m.tracking_id)));
  }

  private filters(auth: AuthContext, input: LogQueryInput): StoredFilters {
    const range = input.dateRangeFilter;
    if (range !== undefined) {
      if (range.length !== 2) throw invalid(`dateRangeFilter must have exactly 2 items; got ${range.length}.`, 'Pass [startUnixSeconds, endUnixSeconds].');
      // Past year 9999 a date has no 4-digit ISO form (stored dates compare as text); past 8.64e15 ms, no Date at all.
      if (range.some((n) => typeof n !== 'number' || !Number.isFinite(n) || n < 0 || toMs(n) > MAX_TIMESTAMP_MS)) {
        throw invalid('dateRangeFilter items must be unix timestamps between 1970 and the end of year 9999.', 'Pass [startUnixSeconds, endUnixSeconds].');
      }
      if (toMs(range[0]) > toMs(range[1])) throw invalid('dateRangeFilter start is after its end.', 'Pass [start, end] with start <= end.');
    }
    const statuses = input.statusFilter === undefined ? [] : [input.statusFilter].flat();
    for (const status of statuses) {
      if (!(LOG_STATUSES as readonly string[]).includes(status)) throw invalid(`statusFilter "${status}" is not one of ${LOG_STATUSES.join(', ')}.`);
    }
    for (const channel of input.channelFilter ?? []) {
      if (!FILTER_CHANNELS.includes(channel)) throw invalid(`channelFilter "${channel}" is not one of ${FILTER_CHANNELS.join(', ')}.`);
    }
    // envIdFilter may name other environments of the account for account-scope callers only
    // (the search is scoped by account, so another account's ids find nothing); without it, a
    // query searches the environment the caller acts in.
    const named = input.envIdFilter?.length ? input.envIdFilter : null;
    if (named && auth.scope !== 'account' && named.some((e) => e !== auth.envId)) {
      throw new AppError('FORBIDDEN', 'envIdFilter names an environment these credentials do not act in.', 'Leave envIdFilter out, or use an account-scope API key to search several environments.');
    }
    const envIds = named ?? [requireEnv(auth)];
    return {
      accountId: auth.accountId,
      envIds,
      from: range ? toIso(range[0]) : null,
      // The end is inclusive to the second.
      to: range ? new Date(new Date(toIso(range[1])).getTime() + (range[1] > 1e12 ? 0 : 999)).toISOString() : null,
      userId: typeof input.userFilter === 'string' ? input.userFilter : null,
      userIds: Array.isArray(input.userFilter) && input.userFilter.length ? input.userFilter : null,
      notificationIds: input.notificationFilter?.length ? input.notificationFilter : null,
      trackingIds: input.trackingIds?.length ? input.trackingIds.map((id) => id.toLowerCase()) : null,
      rawStatus: typeof input.statusFilter === 'string' ? input.statusFilter : null,
      rawStatuses: Array.isArray(input.statusFilter) && input.statusFilter.length ? input.statusFilter : null,
      rawChannels: input.channelFilter ?? null,
      requestContains: input.requestFilter?.length ? input.requestFilter : null,
    };
  }

  private async records(rows: LogMessage[]): Promise<LogRecord[]> {
    if (rows.length === 0) return [];
    return this.recordsOf(rows, groupBy(await this.repo.deliveriesOf(rows[0].account_id, rows.map((m) => m.tracking_id)), (d) => d.tracking_id));
  }

  /** The log records of these messages, given their deliveries. */
  private async recordsOf(rows: LogMessage[], deliveries: Map<string, LogDelivery[]>): Promise<LogRecord[]> {
    if (rows.length === 0) return [];
    const attempts = await this.attemptsOf(rows[0].account_id, rows);
    return rows.map((m) => toLogRecord(m, deliveries.get(m.tracking_id) ?? [], attempts, this.limits.requestChars));
  }

  /** The attempts of these messages' deliveries, by delivery id: read in the account and the environments the messages are in. */
  private async attemptsOf(accountId: string, messages: Pick<LogMessage, 'env_id' | 'tracking_id'>[]): Promise<Map<string, AttemptRow[]>> {
    const envIds = [...new Set(messages.map((m) => m.env_id))];
    return groupBy(await this.messages.attemptsOf({ accountId, envIds }, messages.map((m) => m.tracking_id)), (a) => a.delivery_id);
  }
}

export const tooManyTrackingIds = (count: number) =>
  new AppError('TOO_MANY_TRACKING_IDS', `At most ${MAX_TRACKING_IDS} tracking ids per request; got ${count}.`, 'Split the lookup, or use POST /logs/query.');

function groupBy<T>(items: T[], key: (t: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = map.get(k);
    if (list) list.push(item);
    else map.set(k, [item]);
  }
  return map;
}

/** Whether a message read holds its whole request body, not only its start. */
const isWhole = (m: LogMessage) => Buffer.byteLength(m.request) >= m.request_bytes;

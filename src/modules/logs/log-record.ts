import type { AttemptRow, DeliveryRow, MessageRow } from '../sending/sending.tables.js';

/**
 * One provider call of a delivery, as `<channel>_attempts` lists them (a Clarion field; the
 * spec's Log record names none): when it started, how long it took, how it ended, and the
 * provider's code and error text (or its response, on success).
 */
export interface LogAttempt {
  attempt: number;
  started_at: string;
  duration_ms: number;
  /** success; retry (failed, made again later); failed (failed for good). */
  outcome: 'success' | 'retry' | 'failed';
  provider_code?: string;
  error?: string;
  response?: string;
}

export type LogRecord = Record<string, string | number | boolean | LogAttempt[] | undefined> & { trackingId: string; accountId: string };

/**
 * A message as its log reads it: `request` may be only the start of the send's body (a log does
 * not carry a body of many megabytes), `request_bytes` is the whole body's size in UTF-8 bytes.
 */
export type LogMessage = Omit<MessageRow, 'request'> & { request: string; request_bytes: number };

/** A delivery as its log reads it: without its rendered content, which no log field shows and which can be large. */
export type LogDelivery = Omit<DeliveryRow, 'content'>;

/** Characters of a send's request body a log record carries (README, Logs). */
export const LOG_REQUEST_CHARS = 65_536;

/**
 * The `request` a log record shows: the body whole, or its first `maxChars` characters followed
 * by a marker with the whole size (and `request_truncated`, `request_bytes`), so a reader sees it
 * is cut. `text` is the body or its start; it is whole when it has all `bytes` bytes.
 */
export function logRequest(text: string, bytes: number, maxChars: number): { request: string; request_truncated?: true; request_bytes?: number } {
  if (text.length <= maxChars && Buffer.byteLength(text) >= bytes) return { request: text };
  let kept = text.slice(0, maxChars);
  // Not half of a surrogate pair: the rest of the record must stay valid UTF-8 once encoded.
  if (kept.length > 0 && /[\uD800-\uDBFF]$/.test(kept)) kept = kept.slice(0, -1);
  return { request: `${kept}${requestTruncatedMarker(bytes)}`, request_truncated: true, request_bytes: bytes };
}

/** Ends a cut `request` (README, Logs). */
export const requestTruncatedMarker = (bytes: number) => `…[request truncated: ${bytes} bytes in all]`;

const after = (from: string, to: string | null) => (to ? new Date(to).getTime() - new Date(from).getTime() : undefined);

const IGNORED_BY: Record<string, string> = { DEDUPLICATED: 'DEDUPLICATION', THROTTLED: 'THROTTLING' };

/**
 * The spec's Log record: a view over a message, its deliveries and their attempts (by delivery
 * id, in attempt order). Absent values are omitted.
 */
export function toLogRecord(
  message: LogMessage,
  deliveries: LogDelivery[],
  attempts: ReadonlyMap<string, AttemptRow[]> = new Map(),
  requestChars = LOG_REQUEST_CHARS,
): LogRecord {
  const record: LogRecord = {
    trackingId: message.tracking_id,
    accountId: message.account_id,
    envId: message.env_id,
    clientId: message.env_id,
    type: message.notification_id,
    received_at: message.received_at,
    processed_at: message.processed_at ?? undefined,
    user_id: message.user_id,
    user_email: message.user_email ?? undefined,
    user_number: message.user_number ?? undefined,
    ip: message.ip ?? undefined,
    agent: message.agent ?? undefined,
    ...logRequest(message.request, message.request_bytes, requestChars),
    scheduled_for: message.scheduled_for ?? undefined,
    schedule_updated_at: message.schedule_updated_at ?? undefined,
    schedule_updated_to: message.schedule_updated_to ?? undefined,
    schedule_deleted_at: message.schedule_deleted_at ?? undefined,
    failed_at: message.failed_at ?? undefined,
    failed_code: message.failed_code ?? undefined,
    failed_internal: message.failed_internal ?? undefined,
  };
  // Retracted before it was processed (its deliveries' retractions are <channel>_retracted_at, in their log fields).
  if (message.state === 'retracted') record.retracted = true;
  if (message.skipped) {
    for (const [ch, reason] of Object.entries(JSON.parse(message.skipped) as Record<string, string>)) {
      record[`${ch}_routing`] = 'SKIP';
      record[`${ch}_routing_reason`] = reason;
      // The whole send was ignored (send-gates.ts): the SDK's LogsGetResponseLogsInnerIgnoredEnum.
      if (reason in IGNORED_BY) record.ignored = IGNORED_BY[reason];
    }
  }
  for (const d of deliveries) {
    const ch = d.channel;
    record[`${ch}_routing`] = d.routing;
    if (d.routing_reason) record[`${ch}_routing_reason`] = d.routing_reason;
    if (d.preview) record[`${ch}_preview`] = d.preview;
    if (d.sent_at) {
      record[`${ch}_sent_at`] = d.sent_at;
      record[`${ch}_sent_after`] = after(message.received_at, d.sent_at);
    }
    if (d.delivered_at) {
      record[`${ch}_delivered_at`] = d.delivered_at;
      record[`${ch}_delivered_after`] = after(message.received_at, d.delivered_at);
    }
    if (d.failed_at) {
      record[`${ch}_failed_at`] = d.failed_at;
      if (d.failed_code) record[`${ch}_failed_code`] = d.failed_code;
      if (d.failed_internal) record[`${ch}_failed_internal`] = d.failed_internal;
    }
    if (d.extra) Object.assign(record, JSON.parse(d.extra));
    const made = attempts.get(d.id);
    if (made?.length) record[`${ch}_attempts`] = made.map(logAttempt);
  }
  for (const key of Object.keys(record)) if (record[key] === undefined) delete record[key];
  return record;
}

function logAttempt(a: AttemptRow): LogAttempt {
  const out: LogAttempt = { attempt: a.attempt, started_at: a.started_at, duration_ms: a.duration_ms, outcome: a.outcome };
  if (a.provider_code) out.provider_code = a.provider_code;
  if (a.detail) out[a.outcome === 'success' ? 'response' : 'error'] = a.detail;
  return out;
}

/**
 * Overall status of a log, for statusFilter: the worst delivery state wins. Retracted deliveries
 * do not count, unless every delivery was retracted (then the log is `retracted`).
 */
export function logStatus(message: Pick<MessageRow, 'state'>, deliveries: Pick<DeliveryRow, 'routing' | 'status'>[]): 'scheduled' | 'canceled' | 'processing' | 'failed' | 'sent' | 'delivered' | 'skipped' | 'retracted' {
  if (message.state === 'scheduled') return 'scheduled';
  if (message.state === 'canceled') return 'canceled';
  if (message.state === 'failed') return 'failed';
  if (message.state === 'retracted') return 'retracted';
  const sending = deliveries.filter((d) => d.routing === 'SEND');
  if (message.state === 'queued' || sending.some((d) => d.status === 'pending')) return 'processing';
  if (sending.length === 0) return 'skipped';
  const kept = sending.filter((d) => d.status !== 'retracted');
  if (kept.length === 0) return 'retracted';
  if (kept.some((d) => d.status === 'failed')) return 'failed';
  if (kept.every((d) => d.status === 'delivered')) return 'delivered';
  return 'sent';
}

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

const after = (from: string, to: string | null) => (to ? new Date(to).getTime() - new Date(from).getTime() : undefined);

const IGNORED_BY: Record<string, string> = { DEDUPLICATED: 'DEDUPLICATION', THROTTLED: 'THROTTLING' };

/**
 * The spec's Log record: a view over a message, its deliveries and their attempts (by delivery
 * id, in attempt order). Absent values are omitted.
 */
export function toLogRecord(message: MessageRow, deliveries: DeliveryRow[], attempts: ReadonlyMap<string, AttemptRow[]> = new Map()): LogRecord {
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
    request: message.request,
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
export function logStatus(message: MessageRow, deliveries: DeliveryRow[]): 'scheduled' | 'canceled' | 'processing' | 'failed' | 'sent' | 'delivered' | 'skipped' | 'retracted' {
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

import { invalid } from '../../errors.js';
import { isCalendarDateTime } from '../../http/schemas.js';
import type { InappRow } from './inapp.repository.js';

export interface InappReply {
  date: string;
  message: string;
}

export interface InappDeliveryOptions {
  defaultDeliveryOption: 'off' | 'instant';
  off?: { enabled: boolean };
  instant?: { enabled: boolean };
  batching?: boolean;
  batchingKey?: string;
  batchingWindow?: number;
}

/** The In-app notification of the interface; `id` is the trackingId of the message it came from. */
export interface InappNotification {
  id: string;
  notificationId: string;
  subNotificationId?: string;
  seen: boolean;
  title: string;
  redirectURL?: string;
  imageURL?: string;
  deliveryOptions?: InappDeliveryOptions;
  template?: Record<string, unknown>;
  parameters?: Record<string, unknown>;
  date: string;
  opened?: string;
  clicked?: string;
  archived?: string;
  actioned1?: string;
  actioned2?: string;
  replies?: InappReply[];
  expDate?: string;
}

export const STATUS_FIELDS = ['opened', 'clicked', 'archived', 'actioned1', 'actioned2'] as const;
export type StatusField = (typeof STATUS_FIELDS)[number];

const parseJson = <T>(text: string | null): T | undefined => (text === null ? undefined : (JSON.parse(text) as T));

export function toInappNotification(row: InappRow): InappNotification {
  const replies = parseJson<InappReply[]>(row.replies) ?? [];
  const optional: Partial<InappNotification> = {
    subNotificationId: row.sub_notification_id ?? undefined,
    redirectURL: row.redirect_url ?? undefined,
    imageURL: row.image_url ?? undefined,
    deliveryOptions: parseJson<InappDeliveryOptions>(row.delivery_options),
    template: parseJson<Record<string, unknown>>(row.template),
    parameters: parseJson<Record<string, unknown>>(row.parameters),
    opened: row.opened ?? undefined,
    clicked: row.clicked ?? undefined,
    archived: row.archived ?? undefined,
    actioned1: row.actioned1 ?? undefined,
    actioned2: row.actioned2 ?? undefined,
    replies: replies.length > 0 ? replies : undefined,
    expDate: row.exp_date ?? undefined,
  };
  const notification: InappNotification = {
    id: row.tracking_id,
    notificationId: row.notification_id,
    seen: row.seen === 1,
    title: row.title,
    date: row.date,
  };
  for (const [key, value] of Object.entries(optional)) {
    if (value !== undefined) (notification as unknown as Record<string, unknown>)[key] = value;
  }
  return notification;
}

/** Epoch numbers up to 1e11 are seconds (that is until year 5138), larger ones milliseconds. */
function fromEpoch(value: number): Date {
  return new Date(value < 1e11 ? value * 1000 : value);
}

/**
 * Dates are stored as ISO text and compared as text (`before`, `expDate`), which orders them only
 * while the year has four digits: years 0000-9999 are accepted, the rest of JavaScript's range
 * (years up to ±275760, written "+010000-...") is refused, and so is anything beyond it.
 */
const MIN_INSTANT_MS = Date.parse('0000-01-01T00:00:00.000Z');
const MAX_INSTANT_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * A point in time given as epoch seconds/milliseconds (number or digits) or an ISO date; returns
 * ISO-8601 UTC, which is how dates are stored and compared. Empty, "undefined" and "null" mean
 * "not given": the published in-app client sends `before=undefined` on its first page.
 */
export function parseInstant(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  let date: Date | undefined;
  if (typeof value === 'string') {
    const text = value.trim();
    if (text === '' || text === 'undefined' || text === 'null') return undefined;
    // Only ISO forms: Date alone reads "May 1", "hello 12" or "-5" as some date of 2001 (in the
    // server's zone) and rolls 2026-02-30 over into March.
    if (/^\d+(\.\d+)?$/.test(text)) date = fromEpoch(Number(text));
    else if (isCalendarDateTime(text)) date = new Date(text);
  } else if (typeof value === 'number' && Number.isFinite(value)) {
    date = fromEpoch(value);
  }
  const ms = date?.getTime() ?? Number.NaN;
  // NaN fails both comparisons: an Invalid Date (e.g. from 1e20) would throw in toISOString().
  if (date && ms >= MIN_INSTANT_MS && ms <= MAX_INSTANT_MS) return date.toISOString();
  throw invalid(
    `"${field}" must be a timestamp or an ISO date from year 0000 to 9999, got ${String(JSON.stringify(value)).slice(0, 100)}.`,
    'Send e.g. 2026-01-15T10:00:00.000Z or 1768471200000.',
  );
}

/**
 * A status value of a PATCH: a timestamp sets it, true sets it to now, false/null/"" clears it
 * (the published in-app client sends null to un-archive).
 */
export function parseStatusValue(value: unknown, field: string, now: Date): string | null | undefined {
  if (value === undefined) return undefined;
  if (value === null || value === false || value === '') return null;
  if (value === true) return now.toISOString();
  return parseInstant(value, field) ?? null;
}

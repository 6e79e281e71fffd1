import { invalid } from '../../errors.js';
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
 * A point in time given as epoch seconds/milliseconds (number or digits) or an ISO date; returns
 * ISO-8601 UTC, which is how dates are stored and compared. Empty, "undefined" and "null" mean
 * "not given": the published in-app client sends `before=undefined` on its first page.
 */
export function parseInstant(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') {
    const text = value.trim();
    if (text === '' || text === 'undefined' || text === 'null') return undefined;
    const date = /^\d+(\.\d+)?$/.test(text) ? fromEpoch(Number(text)) : new Date(text);
    if (!Number.isNaN(date.getTime())) return date.toISOString();
  } else if (typeof value === 'number' && Number.isFinite(value)) {
    return fromEpoch(value).toISOString();
  }
  throw invalid(`"${field}" must be a timestamp or an ISO date, got ${JSON.stringify(value)}.`, 'Send e.g. 2026-01-15T10:00:00.000Z or 1768471200000.');
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

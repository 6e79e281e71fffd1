import { invalid } from '../../errors.js';
import { validateEmail } from '../users/users.validation.js';
import { parseFilter } from './audience-filter.js';
import type { BroadcastStatus, PausedReason } from './broadcast-states.js';
import type { BroadcastRow } from './broadcasts.tables.js';

/** A broadcast's audience: exactly one of a filter over users and a list of addresses. */
export type Audience = { filter: Record<string, unknown> } | { emails: string[] };

export const MAX_AUDIENCE_EMAILS = 10_000;
/** The platform default sender's limit (spec: Limits): testing only. */
export const DEFAULT_SENDER_MAX_RECIPIENTS = 10;

/** The spec's Broadcast record. */
export interface BroadcastView {
  broadcastId: string;
  name: string;
  status: BroadcastStatus;
  pausedReason?: PausedReason;
  type?: string;
  channel: 'email';
  audience: Audience;
  fromName: string;
  fromAddress: string;
  replyToAddress?: string;
  subject: string;
  html: string;
  /** Single-record reads only. */
  internalTemplate?: string;
  scheduleAt?: string;
  archivedAt?: string;
  createdAt: string;
  updatedAt: string;
}

/** The fields POST /broadcasts takes (schema-checked by the route). */
export interface CreateInput {
  name: string;
  type?: string;
  channel?: 'email';
  audience: { filter?: unknown; emails?: unknown[] };
  fromName: string;
  fromAddress: string;
  replyToAddress?: string;
  subject: string;
  html: string;
  internalTemplate?: string;
}

/** The fields PATCH takes: any of the writable ones but internalTemplate; null clears type and replyToAddress. */
export type UpdateInput = Partial<Omit<CreateInput, 'type' | 'replyToAddress' | 'internalTemplate'>> & {
  type?: string | null;
  replyToAddress?: string | null;
  internalTemplate?: unknown;
};

/**
 * Validates an audience: exactly one of `filter` (parseFilter) and `emails` (each an address,
 * duplicates dropped without regard to case, the first spelling kept).
 */
export function parseAudience(raw: { filter?: unknown; emails?: unknown[] }, path = 'audience'): Audience {
  const hasFilter = raw.filter !== undefined;
  const hasEmails = raw.emails !== undefined;
  if (hasFilter === hasEmails) {
    throw invalid(
      `${path} must have exactly one of filter and emails; it has ${hasFilter ? 'both' : 'neither'}.`,
      'Send {"filter": {"properties.plan": "pro"}} to choose users by a query, or {"emails": ["a@example.com", ...]} for a list of addresses.',
    );
  }
  if (hasFilter) {
    parseFilter(raw.filter, `${path}.filter`);
    return { filter: raw.filter as Record<string, unknown> };
  }
  const list = raw.emails!;
  if (list.length > MAX_AUDIENCE_EMAILS) throw invalid(`${path}.emails has ${list.length} addresses; at most ${MAX_AUDIENCE_EMAILS} are allowed.`, 'Split the list, or choose users with a filter.');
  const seen = new Set<string>();
  const emails: string[] = [];
  list.forEach((value, i) => {
    const email = validateEmail(typeof value === 'string' ? value.trim() : value, `${path}.emails[${i}]`);
    const key = email.toLowerCase();
    if (seen.has(key)) return;
    seen.add(key);
    emails.push(email);
  });
  return { emails };
}

export function checkAddress(value: string, field: string): string {
  return validateEmail(value.trim(), field);
}

export function audienceOf(row: Pick<BroadcastRow, 'audience'>): Audience {
  return JSON.parse(row.audience) as Audience;
}

export function broadcastView(row: BroadcastRow, single: boolean): BroadcastView {
  const view: BroadcastView = {
    broadcastId: row.id,
    name: row.name,
    status: row.status,
    channel: 'email',
    audience: audienceOf(row),
    fromName: row.from_name,
    fromAddress: row.from_address,
    subject: row.subject,
    html: row.html,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  if (row.paused_reason !== null) view.pausedReason = row.paused_reason;
  if (row.notification_id !== null) view.type = row.notification_id;
  if (row.reply_to_address !== null) view.replyToAddress = row.reply_to_address;
  if (single && row.internal_template !== null) view.internalTemplate = row.internal_template;
  if (row.schedule_at !== null) view.scheduleAt = row.schedule_at;
  if (row.archived_at !== null) view.archivedAt = row.archived_at;
  return view;
}

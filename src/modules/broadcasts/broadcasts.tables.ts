import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { PreferencesTables } from '../preferences/preferences.tables.js';
import type { BroadcastOperation, BroadcastStatus, PausedReason } from './broadcast-states.js';

/** A broadcast (migration 0087). */
export interface BroadcastsTable {
  id: string;
  account_id: string;
  env_id: string;
  name: string;
  status: BroadcastStatus;
  paused_reason: PausedReason | null;
  notification_id: string | null;
  /** JSON: {filter} or {emails}. */
  audience: string;
  from_name: string;
  from_address: string;
  reply_to_address: string | null;
  subject: string;
  html: string;
  internal_template: string | null;
  schedule_at: string | null;
  archived_at: string | null;
  /** The last user id (filter) or list index (emails) frozen into recipients; null before the first page. */
  freeze_cursor: string | null;
  /** Recipient rows written so far: the last `seq`. */
  frozen_count: number;
  audience_frozen_at: string | null;
  /** The last recipient seq handed over to the intake (migration 0088). */
  send_cursor: number;
  /** The delivery job chain that owns the broadcast now; null before delivery starts. */
  send_token: string | null;
  /** When that chain last ran a step (migration 0093); null before delivery starts. */
  send_step_at: string | null;
  /** Chains the recovery sweep started since a page was last handed over (its backoff). */
  send_restarts: number;
  created_at: string;
  updated_at: string;
}

/** One applied operation of a broadcast. */
export interface BroadcastTransitionsTable {
  id: string;
  broadcast_id: string;
  account_id: string;
  env_id: string;
  operation: BroadcastOperation;
  from_status: BroadcastStatus | 'new';
  to_status: BroadcastStatus | 'deleted';
  paused_reason: PausedReason | null;
  actor: string;
  at: string;
}

export const RECIPIENT_STATES = ['pending', 'sent', 'delivered', 'failed', 'bounced', 'opened', 'clicked', 'unsubscribed', 'skipped'] as const;
export type RecipientState = (typeof RECIPIENT_STATES)[number];
export const SKIP_REASONS = ['NO_EMAIL', 'SUPPRESSED', 'BOUNCED', 'UNSUBSCRIBED', 'CANCELED'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

/** Per account, the first free slot of its broadcast rate (migration 0088). */
export interface BroadcastPacingTable {
  account_id: string;
  next_at: string;
}

/** Per account and sender domain, the first free slot of the domain's broadcast rate (migration 0092). */
export interface BroadcastDomainPacingTable {
  account_id: string;
  domain: string;
  next_at: string;
}

/** One user of a broadcast's frozen audience. */
export interface BroadcastRecipientsTable {
  broadcast_id: string;
  seq: number;
  account_id: string;
  env_id: string;
  user_id: string;
  email: string | null;
  state: RecipientState;
  skip_reason: SkipReason | null;
  tracking_id: string | null;
  sent_at: string | null;
  delivered_at: string | null;
  failed_at: string | null;
  bounced_at: string | null;
  opened_at: string | null;
  clicked_at: string | null;
  unsubscribed_at: string | null;
  /** When its message is due (its slot of the account's rate); null until handed over. */
  due_at: string | null;
  updated_at: string;
}

export type BroadcastTables = {
  broadcasts: BroadcastsTable;
  broadcast_transitions: BroadcastTransitionsTable;
  broadcast_recipients: BroadcastRecipientsTable;
  broadcast_pacing: BroadcastPacingTable;
  broadcast_domain_pacing: BroadcastDomainPacingTable;
};
export type BroadcastsDb = Kysely<CoreTables & PreferencesTables & BroadcastTables>;
export type BroadcastRow = Selectable<BroadcastsTable>;
export type TransitionRow = Selectable<BroadcastTransitionsTable>;
export type RecipientRow = Selectable<BroadcastRecipientsTable>;

export function broadcastsDb(db: Kysely<CoreTables>): BroadcastsDb {
  return db.withTables<PreferencesTables & BroadcastTables>();
}

import type { Generated, Kysely, Selectable } from 'kysely';
import { columnList } from '../../storage/bulk-insert.js';
import type { CoreTables } from '../../storage/schema.js';

export type MessagesTable = {
  tracking_id: string;
  account_id: string;
  env_id: string;
  notification_id: string;
  user_id: string;
  user_email: string | null;
  user_number: string | null;
  template_id: string | null;
  sub_notification_id: string | null;
  request: string;
  /** scheduled -> queued -> processed; canceled (schedule deleted); failed (could not be processed); retracted (before it was processed). */
  state: 'scheduled' | 'queued' | 'processed' | 'canceled' | 'failed' | 'retracted';
  job_id: string | null;
  ip: string | null;
  agent: string | null;
  received_at: string;
  processed_at: string | null;
  scheduled_for: string | null;
  schedule_updated_at: string | null;
  schedule_updated_to: string | null;
  schedule_deleted_at: string | null;
  failed_at: string | null;
  failed_code: string | null;
  failed_internal: string | null;
  /** JSON {logChannel: SkipReason} of the channels this message did not use. */
  skipped: string | null;
}

export type DeliveriesTable = {
  id: string;
  tracking_id: string;
  account_id: string;
  env_id: string;
  channel: string;
  routing: 'SEND' | 'SKIP';
  routing_reason: string | null;
  /** pending -> sent (-> delivered) | failed; skipped when routing is SKIP; digested: collected into a digest (modules/digests); retracted (transitions.ts). */
  status: 'pending' | 'sent' | 'delivered' | 'failed' | 'skipped' | 'digested' | 'retracted';
  content: string | null;
  preview: string | null;
  attempts: number;
  sent_at: string | null;
  delivered_at: string | null;
  failed_at: string | null;
  failed_code: string | null;
  failed_internal: string | null;
  provider_message_id: string | null;
  extra: string | null;
  created_at: string;
  updated_at: string;
}

export type DeliveryAttemptsTable = {
  id: string;
  delivery_id: string;
  attempt: number;
  started_at: string;
  duration_ms: number;
  outcome: 'success' | 'retry' | 'failed';
  provider_code: string | null;
  detail: string | null;
}

export type IdempotencyKeysTable = {
  env_id: string;
  key: string;
  request_hash: string;
  tracking_id: string;
  response: string;
  created_at: string;
}

export type UsageCountersTable = {
  account_id: string;
  cycle_start: string;
  messages: number;
}

export type LogQueriesTable = {
  id: string;
  account_id: string;
  env_id: string | null;
  filters: string;
  status: 'Running' | 'Complete' | 'Failed';
  result: string | null;
  error: string | null;
  created_at: string;
  completed_at: string | null;
}

export type ProviderEventsTable = {
  id: string;
  channel: string;
  provider_message_id: string;
  status: 'delivered' | 'failed';
  at: string;
  code: string | null;
  internal: string | null;
  extra: string | null;
  applied_at: string | null;
};

/** SQLite only: accepted sends not yet ingested into messages (see messages.journal.ts). */
export type SendIntakeTable = {
  seq: Generated<number>;
  /** JSON array of journal entries (see journalEntry). */
  messages: string;
  created_at: string;
  /** Lowest and highest tracking id in the chunk; null in chunks written before 0065. */
  first_id: string | null;
  last_id: string | null;
};

export type SendingTables = {
  provider_events: ProviderEventsTable;
  send_intake: SendIntakeTable;
  messages: MessagesTable;
  deliveries: DeliveriesTable;
  delivery_attempts: DeliveryAttemptsTable;
  idempotency_keys: IdempotencyKeysTable;
  usage_counters: UsageCountersTable;
  log_queries: LogQueriesTable;
}

export type SendingDb = Kysely<CoreTables & SendingTables>;
export type MessageRow = Selectable<MessagesTable>;
export type DeliveryRow = Selectable<DeliveriesTable>;
export type AttemptRow = Selectable<DeliveryAttemptsTable>;

/** Every column of a message row (the compiler checks the list is whole), in table order. */
export const MESSAGE_COLUMNS = columnList<MessageRow>({
  tracking_id: 1,
  account_id: 1,
  env_id: 1,
  notification_id: 1,
  user_id: 1,
  user_email: 1,
  user_number: 1,
  template_id: 1,
  sub_notification_id: 1,
  request: 1,
  state: 1,
  job_id: 1,
  ip: 1,
  agent: 1,
  received_at: 1,
  processed_at: 1,
  scheduled_for: 1,
  schedule_updated_at: 1,
  schedule_updated_to: 1,
  schedule_deleted_at: 1,
  failed_at: 1,
  failed_code: 1,
  failed_internal: 1,
  skipped: 1,
});

/** Every column of a delivery row (the compiler checks the list is whole). */
export const DELIVERY_COLUMNS = columnList<DeliveryRow>({
  id: 1,
  tracking_id: 1,
  account_id: 1,
  env_id: 1,
  channel: 1,
  routing: 1,
  routing_reason: 1,
  status: 1,
  content: 1,
  preview: 1,
  attempts: 1,
  sent_at: 1,
  delivered_at: 1,
  failed_at: 1,
  failed_code: 1,
  failed_internal: 1,
  provider_message_id: 1,
  extra: 1,
  created_at: 1,
  updated_at: 1,
});

/** Every column of an attempt row (the compiler checks the list is whole). */
export const ATTEMPT_COLUMNS = columnList<AttemptRow>({
  id: 1,
  delivery_id: 1,
  attempt: 1,
  started_at: 1,
  duration_ms: 1,
  outcome: 1,
  provider_code: 1,
  detail: 1,
});

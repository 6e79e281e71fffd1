import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { DeliveryTables } from '../delivery/delivery.tables.js';
import type { SendingTables } from '../sending/sending.tables.js';

/** Row types of migrations 0070_webhooks and 0095_webhook_replay. */
export interface WebhookEndpointsTable {
  id: string;
  account_id: string;
  env_id: string;
  /** 'events' for the pingram SDK's single endpoint (/webhooks/events); null otherwise. */
  slot: string | null;
  url: string;
  /** JSON array of event names. */
  events: string;
  secret_enc: string;
  /** The secret before the last rotation, still signing until previous_secret_until. */
  previous_secret_enc: string | null;
  previous_secret_until: string | null;
  /** First failed attempt since the last success; five days of it disable the endpoint. */
  failing_since: string | null;
  disabled_at: string | null;
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookCursorsTable {
  env_id: string;
  last_id: number;
}

export interface WebhookEventsTable {
  id: string;
  account_id: string;
  env_id: string;
  type: string;
  tracking_id: string | null;
  source_id: number | null;
  payload: string;
  created_at: string;
}

export type WebhookDeliveryStatus = 'pending' | 'succeeded' | 'failed';

/** What started a delivery's current round again; its first attempt is a 'replay' either way. */
export type DeliveryRestart = 'replay' | 'recover';

export interface WebhookDeliveriesTable {
  id: string;
  endpoint_id: string;
  event_id: string;
  account_id: string;
  env_id: string;
  event_type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  round_attempts: number;
  next_attempt_at: string;
  lease: string | null;
  last_attempt_at: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  /** Null while the round is the event's own (migration 0095). */
  restarted_by: DeliveryRestart | null;
}

/** event: the first attempt; retry: a scheduled one; replay: the first after a replay or a recovery. */
export type AttemptTrigger = 'event' | 'retry' | 'replay';

export interface WebhookAttemptsTable {
  id: string;
  delivery_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  account_id: string;
  env_id: string;
  attempt: number;
  at: string;
  /** 1 or 0 (a number on both engines). */
  success: number;
  status_code: number | null;
  duration_ms: number;
  /** The first 4 KB of the response body. */
  response: string | null;
  error: string | null;
  next_attempt_at: string | null;
  trigger: AttemptTrigger;
}

export type WebhookTables = {
  webhook_endpoints: WebhookEndpointsTable;
  webhook_cursors: WebhookCursorsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
};

export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
export type WebhookEventRow = Selectable<WebhookEventsTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;

export type WebhooksDb = Kysely<CoreTables & WebhookTables & DeliveryTables & SendingTables>;

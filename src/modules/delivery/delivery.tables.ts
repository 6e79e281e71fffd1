import type { Kysely } from 'kysely';
import { columnList } from '../../storage/bulk-insert.js';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingTables } from '../sending/sending.tables.js';

/** One applied transition of a message or a delivery (migration 0068). */
export type DeliveryEventsTable = {
  env_id: string;
  /** Increases by one per environment, in commit order (see delivery_event_counters). */
  id: number;
  account_id: string;
  tracking_id: string;
  /** Null for a message's own transitions. */
  delivery_id: string | null;
  /** Log form of the delivery's channel; null for a message's own transitions. */
  channel: string | null;
  kind: 'message' | 'delivery';
  /** Null when the transition created the row. */
  from_state: string | null;
  to_state: string;
  /** The failure code of a transition into failed. */
  code: string | null;
  /** When the state changed (the time stored on the row). */
  at: string;
  /** JSON, or null. */
  details: string | null;
};

/** Every column of a delivery_events row (the compiler checks the list is whole). */
export const EVENT_COLUMNS = columnList<DeliveryEventsTable>({
  env_id: 1,
  id: 1,
  account_id: 1,
  tracking_id: 1,
  delivery_id: 1,
  channel: 1,
  kind: 1,
  from_state: 1,
  to_state: 1,
  code: 1,
  at: 1,
  details: 1,
});

/** The last delivery_events id given out per environment. */
export type DeliveryEventCountersTable = {
  env_id: string;
  last_id: number;
};

export type DeliveryTables = {
  delivery_events: DeliveryEventsTable;
  delivery_event_counters: DeliveryEventCountersTable;
};

export type LedgerDb = Kysely<CoreTables & SendingTables & DeliveryTables>;

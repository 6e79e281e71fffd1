import { columnList } from '../../storage/bulk-insert.js';
import type { WebhookAttemptsTable, WebhookDeliveriesTable, WebhookEventsTable } from './webhooks.tables.js';

/**
 * A table's columns in INSERT order, and a writer of one row's values in that order into a
 * statement's positional arguments. Hand-written writers, not a loop over the column names:
 * reading `row[column]` with the name changing at every step is a megamorphic keyed load, about
 * ten times the cost of the named reads below (about 2.5 of 0.3 µs per 16-column row on the bench
 * host), paid for every webhook event, delivery and attempt row inserted on SQLite. The writers
 * must read the columns in the listed order: test/unit/webhook-row-layouts.test.ts checks that.
 */
export interface RowLayout<Row> {
  columns: readonly (keyof Row & string)[];
  write(row: Row, into: unknown[], at: number): void;
}

export const EVENT_ROW: RowLayout<WebhookEventsTable> = {
  columns: columnList<WebhookEventsTable>({ id: 1, account_id: 1, env_id: 1, type: 1, tracking_id: 1, source_id: 1, payload: 1, created_at: 1 }),
  write(r, v, i) {
    v[i] = r.id;
    v[i + 1] = r.account_id;
    v[i + 2] = r.env_id;
    v[i + 3] = r.type;
    v[i + 4] = r.tracking_id;
    v[i + 5] = r.source_id;
    v[i + 6] = r.payload;
    v[i + 7] = r.created_at;
  },
};

export const DELIVERY_ROW: RowLayout<WebhookDeliveriesTable> = {
  columns: columnList<WebhookDeliveriesTable>({
    id: 1,
    endpoint_id: 1,
    event_id: 1,
    account_id: 1,
    env_id: 1,
    event_type: 1,
    status: 1,
    attempts: 1,
    round_attempts: 1,
    next_attempt_at: 1,
    lease: 1,
    last_attempt_at: 1,
    last_error: 1,
    created_at: 1,
    updated_at: 1,
    restarted_by: 1,
  }),
  write(r, v, i) {
    v[i] = r.id;
    v[i + 1] = r.endpoint_id;
    v[i + 2] = r.event_id;
    v[i + 3] = r.account_id;
    v[i + 4] = r.env_id;
    v[i + 5] = r.event_type;
    v[i + 6] = r.status;
    v[i + 7] = r.attempts;
    v[i + 8] = r.round_attempts;
    v[i + 9] = r.next_attempt_at;
    v[i + 10] = r.lease;
    v[i + 11] = r.last_attempt_at;
    v[i + 12] = r.last_error;
    v[i + 13] = r.created_at;
    v[i + 14] = r.updated_at;
    v[i + 15] = r.restarted_by;
  },
};

export const ATTEMPT_ROW: RowLayout<WebhookAttemptsTable> = {
  columns: columnList<WebhookAttemptsTable>({
    id: 1,
    delivery_id: 1,
    endpoint_id: 1,
    event_id: 1,
    event_type: 1,
    account_id: 1,
    env_id: 1,
    attempt: 1,
    at: 1,
    success: 1,
    status_code: 1,
    duration_ms: 1,
    response: 1,
    error: 1,
    next_attempt_at: 1,
    trigger: 1,
  }),
  write(r, v, i) {
    v[i] = r.id;
    v[i + 1] = r.delivery_id;
    v[i + 2] = r.endpoint_id;
    v[i + 3] = r.event_id;
    v[i + 4] = r.event_type;
    v[i + 5] = r.account_id;
    v[i + 6] = r.env_id;
    v[i + 7] = r.attempt;
    v[i + 8] = r.at;
    v[i + 9] = r.success;
    v[i + 10] = r.status_code;
    v[i + 11] = r.duration_ms;
    v[i + 12] = r.response;
    v[i + 13] = r.error;
    v[i + 14] = r.next_attempt_at;
    v[i + 15] = r.trigger;
  },
};

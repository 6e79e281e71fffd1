import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { Clock, Ids } from '../../clock.js';
import type { Dialect } from '../../storage/db.js';
import type { CoreTables } from '../../storage/schema.js';
import { type WebhookEventType, type WebhookPayload, eventTypeOf, payloadOfTransition } from './events.js';
import { WebhooksRepository } from './webhooks.repository.js';
import type { WebhookDeliveriesTable, WebhookEventsTable } from './webhooks.tables.js';

/** An event to emit: its payload without the id, which the outbox gives. */
export interface NewWebhookEvent {
  accountId: string;
  envId: string;
  type: WebhookEventType;
  payload: Omit<WebhookPayload, 'id' | 'eventType'>;
  /** The ledger transition it comes from (dispatcher only). */
  sourceId?: number;
}

/**
 * Writes events and one delivery per subscribed, enabled endpoint, with the caller's
 * transaction: the dispatcher (for ledger transitions) and, later, the producers of events that
 * are not state changes of the ledger (opens, clicks, unsubscribes, inbound mail and texts),
 * which call emit() inside the transaction that records what happened.
 */
export class WebhookOutbox {
  constructor(
    private readonly deps: { clock: Clock; ids: Ids; dialect: Dialect; sqlite?: SQLite.Database },
  ) {}

  /** emit() over a transaction the caller runs. */
  emit(trx: Kysely<CoreTables>, events: NewWebhookEvent[]): Promise<number> {
    return this.write(WebhooksRepository.over(trx, this.deps.dialect, this.deps.sqlite), events);
  }

  /** Writes the events of one environment; returns how many deliveries were made. */
  async write(repo: WebhooksRepository, events: NewWebhookEvent[]): Promise<number> {
    if (events.length === 0) return 0;
    const now = this.deps.clock.now().toISOString();
    const byEnv = new Map<string, { id: string; account_id: string; events: Set<string> }[]>();
    const eventRows: WebhookEventsTable[] = [];
    const deliveryRows: WebhookDeliveriesTable[] = [];
    for (const event of events) {
      let endpoints = byEnv.get(event.envId);
      if (!endpoints) {
        endpoints = (await repo.enabledEndpoints(event.envId)).map((e) => ({ id: e.id, account_id: e.account_id, events: new Set(JSON.parse(e.events) as string[]) }));
        byEnv.set(event.envId, endpoints);
      }
      const subscribed = endpoints.filter((e) => e.account_id === event.accountId && e.events.has(event.type));
      if (subscribed.length === 0) continue;
      const id = `evt_${this.deps.ids.uuid().replace(/-/g, '')}`;
      const payload: WebhookPayload = { id, eventType: event.type, ...event.payload };
      eventRows.push({
        id,
        account_id: event.accountId,
        env_id: event.envId,
        type: event.type,
        tracking_id: payload.trackingId || null,
        source_id: event.sourceId ?? null,
        payload: JSON.stringify(payload),
        created_at: now,
      });
      for (const endpoint of subscribed) deliveryRows.push(pendingDelivery(this.deps.ids.uuid(), endpoint.id, { id, accountId: event.accountId, envId: event.envId, type: event.type }, now));
    }
    await repo.insertEvents(eventRows);
    await repo.insertDeliveries(deliveryRows);
    return deliveryRows.length;
  }
}

/** Makes the webhook events of ledger transitions (the dispatcher's mapping). */
export function eventsOfTransitions(rows: Parameters<typeof payloadOfTransition>[2][]): NewWebhookEvent[] {
  const events: NewWebhookEvent[] = [];
  for (const row of rows) {
    const type = eventTypeOf(row);
    if (!type) continue;
    const { id: _id, eventType: _type, ...payload } = payloadOfTransition('', type, row);
    events.push({ accountId: row.account_id, envId: row.env_id, type, payload, sourceId: row.id });
  }
  return events;
}

/** A delivery of an event to an endpoint, due at once (the outbox's, and a replay's with no earlier one). */
export function pendingDelivery(id: string, endpointId: string, event: { id: string; accountId: string; envId: string; type: string }, now: string): WebhookDeliveriesTable {
  return {
    id,
    endpoint_id: endpointId,
    event_id: event.id,
    account_id: event.accountId,
    env_id: event.envId,
    event_type: event.type,
    status: 'pending',
    attempts: 0,
    round_attempts: 0,
    next_attempt_at: now,
    lease: null,
    last_attempt_at: null,
    last_error: null,
    created_at: now,
    updated_at: now,
  };
}

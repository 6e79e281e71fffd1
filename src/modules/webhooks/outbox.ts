import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type { Clock, Ids } from '../../clock.js';
import type { Dialect } from '../../storage/db.js';
import type { CoreTables } from '../../storage/schema.js';
import { type TransitionRow, type WebhookEventType, type WebhookPayload, eventTypeOf, payloadOfTransition } from './events.js';
import { type ClaimedDelivery, type EnabledEndpoint, WebhooksRepository } from './webhooks.repository.js';
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

/** An enabled endpoint as the outbox fans events out to it (and the worker posts to it). */
export interface FanoutEndpoint extends EnabledEndpoint {
  subscribed: Set<string>;
}

/** The endpoints' subscriptions parsed once per read. */
export function fanoutEndpoints(rows: EnabledEndpoint[]): FanoutEndpoint[] {
  return rows.map((row) => ({ ...row, subscribed: new Set(JSON.parse(row.events) as string[]) }));
}

/** The endpoints an event goes to: of its account, subscribed to its type. */
export function subscribersOf(endpoints: FanoutEndpoint[], event: Pick<NewWebhookEvent, 'accountId' | 'type'>): FanoutEndpoint[] {
  return endpoints.filter((e) => e.account_id === event.accountId && e.subscribed.has(event.type));
}

export interface OutboxWriteOptions {
  /** Each environment's enabled endpoints, when the caller read them in this transaction already. */
  endpoints?: Map<string, FanoutEndpoint[]>;
  /**
   * Offered each new delivery: returns the lease and due time to write on it when the caller
   * posts it itself right after the commit (the worker, with room for it), null to leave it due
   * now for whichever worker claims it. A leased row is due again when the lease ends, as a
   * claimed one is, so a caller that dies before posting loses nothing.
   */
  take?: (delivery: ClaimedDelivery) => { lease: string; until: string } | null;
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
  async write(repo: WebhooksRepository, events: NewWebhookEvent[], options: OutboxWriteOptions = {}): Promise<number> {
    if (events.length === 0) return 0;
    const now = this.deps.clock.now().toISOString();
    const byEnv = new Map(options.endpoints);
    const eventRows: WebhookEventsTable[] = [];
    const deliveryRows: WebhookDeliveriesTable[] = [];
    const wanted: { event: NewWebhookEvent; subscribed: FanoutEndpoint[] }[] = [];
    for (const event of events) {
      let endpoints = byEnv.get(event.envId);
      if (!endpoints) {
        endpoints = fanoutEndpoints(await repo.enabledEndpoints(event.envId));
        byEnv.set(event.envId, endpoints);
      }
      const subscribed = subscribersOf(endpoints, event);
      if (subscribed.length > 0) wanted.push({ event, subscribed });
    }
    // EMAIL_* events of a broadcast recipient's message carry its broadcastId (one read, only for events someone receives).
    const emailIds = wanted.filter((w) => w.event.type.startsWith('EMAIL_') && w.event.payload.trackingId).map((w) => w.event.payload.trackingId);
    const broadcasts = emailIds.length > 0 ? await repo.broadcastsOf([...new Set(emailIds)]) : undefined;
    for (const { event, subscribed } of wanted) {
      const id = `evt_${this.deps.ids.uuid().replace(/-/g, '')}`;
      const broadcastId = broadcasts?.get(event.payload.trackingId);
      const payload = JSON.stringify({ id, eventType: event.type, ...event.payload, ...(broadcastId ? { broadcastId } : {}) } satisfies WebhookPayload);
      eventRows.push({
        id,
        account_id: event.accountId,
        env_id: event.envId,
        type: event.type,
        tracking_id: event.payload.trackingId || null,
        source_id: event.sourceId ?? null,
        payload,
        created_at: now,
      });
      for (const endpoint of subscribed) {
        const row = pendingDelivery(this.deps.ids.uuid(), endpoint.id, { id, accountId: event.accountId, envId: event.envId, type: event.type }, now);
        const lease = options.take?.({
          id: row.id,
          endpoint_id: endpoint.id,
          event_id: id,
          event_type: event.type,
          account_id: event.accountId,
          env_id: event.envId,
          tracking_id: event.payload.trackingId || null,
          attempts: 0,
          round_attempts: 0,
          restarted_by: null,
          payload,
          url: endpoint.url,
          secret_enc: endpoint.secret_enc,
          previous_secret_enc: endpoint.previous_secret_enc,
          previous_secret_until: endpoint.previous_secret_until,
          endpoint_updated_at: endpoint.updated_at,
          failing_since: endpoint.failing_since,
        });
        if (lease) {
          row.lease = lease.lease;
          row.next_attempt_at = lease.until;
        }
        deliveryRows.push(row);
      }
    }
    await repo.insertEvents(eventRows);
    await repo.insertDeliveries(deliveryRows);
    return deliveryRows.length;
  }
}

/** The webhook event of one ledger transition, or null (see eventTypeOf). */
export function eventOfTransition(row: TransitionRow): NewWebhookEvent | null {
  const type = eventTypeOf(row);
  if (!type) return null;
  const { id: _id, eventType: _type, ...payload } = payloadOfTransition('', type, row);
  return { accountId: row.account_id, envId: row.env_id, type, payload, sourceId: row.id };
}

/** Makes the webhook events of ledger transitions (the dispatcher's mapping). */
export function eventsOfTransitions(rows: TransitionRow[]): NewWebhookEvent[] {
  return rows.map(eventOfTransition).filter((event) => event !== null);
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
    restarted_by: null,
  };
}

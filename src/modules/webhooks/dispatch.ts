import { type FanoutEndpoint, type NewWebhookEvent, type WebhookOutbox, eventOfTransition, fanoutEndpoints, subscribersOf } from './outbox.js';
import type { ClaimedDelivery, WebhooksRepository } from './webhooks.repository.js';

/** The dispatching worker's free slots, as a dispatch step sees them. */
export interface DispatchRoom {
  /** Deliveries the step may make for these endpoints now (0: leave the events in the ledger). */
  budget(endpoints: FanoutEndpoint[]): number;
  /** Takes a slot for a new delivery (posted after the commit), or refuses it (it is written due). */
  take(delivery: ClaimedDelivery): boolean;
}

export interface DispatchStep {
  /** Deliveries made. */
  made: number;
  /** Ledger events remain unread for want of room: dispatch again when room frees. */
  backlog: boolean;
  /** Ledger events remain and room too: dispatch again now. */
  more: boolean;
}

/**
 * One dispatch of an environment's new ledger events (delivery_events past its cursor), in the
 * caller's transaction: the events of about `room.budget()` deliveries (at least one ledger
 * row) become webhook events and deliveries; those the room takes are written leased (`lease`
 * until `until`), the others due now. An environment without enabled endpoints (most, when
 * nobody uses webhooks) skips its events unread: the sends' events cost nothing then.
 */
export async function dispatchStep(
  repo: WebhooksRepository,
  outbox: WebhookOutbox,
  env: { env_id: string; last_id: number },
  room: DispatchRoom,
  options: { lease: string; until: string; limit: number },
): Promise<DispatchStep> {
  const none = { made: 0, backlog: false, more: false };
  const cursor = await repo.lockCursor(env.env_id);
  if (cursor === null) return none;
  const endpoints = fanoutEndpoints(await repo.enabledEndpoints(env.env_id));
  if (endpoints.length === 0) {
    await repo.setCursor(env.env_id, Math.max(cursor, env.last_id));
    return none;
  }
  const budget = room.budget(endpoints);
  if (budget === 0) return { ...none, backlog: true };
  // As many rows as the budget takes when every event goes to every endpoint (when fewer do, the caller reads on).
  const read = Math.min(options.limit, Math.ceil(budget / endpoints.length));
  const rows = await repo.transitionsAfter(env.env_id, cursor, read);
  if (rows.length === 0) return none;
  const events: NewWebhookEvent[] = [];
  let deliveries = 0;
  let last = cursor;
  for (const row of rows) {
    const event = eventOfTransition(row);
    const fanout = event ? subscribersOf(endpoints, event).length : 0;
    if (fanout > 0 && deliveries > 0 && deliveries + fanout > budget) break;
    if (event) events.push(event);
    deliveries += fanout;
    last = row.id;
  }
  const made = await outbox.write(repo, events, {
    endpoints: new Map([[env.env_id, endpoints]]),
    take: (delivery) => (room.take(delivery) ? { lease: options.lease, until: options.until } : null),
  });
  await repo.setCursor(env.env_id, last);
  const left = last !== rows[rows.length - 1].id || rows.length === read;
  return { made, backlog: left && deliveries >= budget, more: left && deliveries < budget };
}

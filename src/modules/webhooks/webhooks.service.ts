import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../errors.js';
import { idCursor } from '../../id-cursor.js';
import { blockedReason } from '../../net/ssrf.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { EVENT_TYPES, isEventType } from './events.js';
import { WebhookOutbox, pendingDelivery } from './outbox.js';
import { generateSecret } from './signing.js';
import { WebhookSender } from './webhook-sender.js';
import { WebhooksRepository } from './webhooks.repository.js';
import type { WebhookAttemptRow, WebhookDeliveryRow, WebhookEndpointRow } from './webhooks.tables.js';
import { WebhookWorker, type WebhookWorkerOptions } from './webhooks.worker.js';

/** The spec's Webhook endpoint record, and why the endpoint is disabled when it is. */
export interface EndpointView {
  id: string;
  webhook: string;
  events: string[];
  secret: string;
  disabled?: boolean;
  disabledAt?: string;
  disabledReason?: string;
  failingSince?: string;
}

export interface EndpointInput {
  webhook: string;
  events: string[];
}

export interface AttemptView {
  id: string;
  eventId: string;
  eventType: string;
  attempt: number;
  at: string;
  success: boolean;
  statusCode: number | null;
  durationMs: number;
  response: string | null;
  error: string | null;
  nextAttemptAt: string | null;
  trigger: string;
}

/** The previous secret keeps signing this long after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * 3600_000;
const MAX_URL_LENGTH = 2048;
/** The slot of the pingram SDK's single endpoint (/webhooks/events). */
const EVENTS_SLOT = 'events';

/**
 * Webhook endpoints (the spec's multi-endpoint form and the pingram SDK's single one), their
 * secrets (generated here, encrypted at rest, rotated with a 24 h overlap), their attempts,
 * replays and recoveries. Owns this process's WebhookWorker (started by webhooks.jobs.ts where
 * the process runs workers), so a replay nudges it at once.
 */
export class WebhooksService {
  readonly repo: WebhooksRepository;
  /** Writes events with the caller's transaction (producers other than the ledger). */
  readonly outbox: WebhookOutbox;
  readonly worker: WebhookWorker;
  readonly sender: WebhookSender;

  constructor(
    private readonly deps: Pick<Deps, 'db' | 'storage' | 'clock' | 'ids' | 'logger' | 'secrets' | 'config' | 'ledger'>,
    options: Partial<WebhookWorkerOptions> = {},
  ) {
    this.repo = new WebhooksRepository(deps.db, deps.storage.dialect, deps.storage.sqlite);
    this.outbox = new WebhookOutbox({ clock: deps.clock, ids: deps.ids, dialect: deps.storage.dialect, sqlite: deps.storage.sqlite });
    const { config } = deps;
    this.sender = new WebhookSender({
      timeoutMs: config.webhookTimeoutMs,
      allowPrivateNetworks: config.allowPrivateNetworks,
      connectionsPerEndpoint: config.webhookEndpointConcurrency,
    });
    this.worker = new WebhookWorker(deps, this.repo, this.outbox, this.sender, {
      pollMs: config.webhookPollMs,
      concurrency: config.webhookConcurrency,
      perEndpoint: config.webhookEndpointConcurrency,
      // A request ends by the timeout; the lease outlasts it, so only a dead worker's claims expire.
      leaseMs: config.webhookTimeoutMs + 5_000,
      ...options,
    });
  }

  // --- endpoints --------------------------------------------------------------------------

  async create(scope: EnvScope, input: EndpointInput, slot: string | null = null): Promise<EndpointView> {
    const { url, events } = this.validate(input);
    const now = this.deps.clock.now().toISOString();
    const secret = generateSecret();
    const id = this.deps.ids.uuid();
    await this.repo.insertEndpoint({
      id,
      account_id: scope.accountId,
      env_id: scope.envId,
      slot,
      url,
      events: JSON.stringify(events),
      secret_enc: this.deps.secrets.encrypt(secret),
      previous_secret_enc: null,
      previous_secret_until: null,
      failing_since: null,
      disabled_at: null,
      disabled_reason: null,
      created_at: now,
      updated_at: now,
    });
    return { id, webhook: url, events, secret };
  }

  async list(scope: EnvScope): Promise<EndpointView[]> {
    return (await this.repo.listEndpoints(scope)).map((row) => this.view(row));
  }

  async get(scope: EnvScope, id: string): Promise<EndpointView> {
    return this.view(await this.endpoint(scope, id));
  }

  /** Replaces URL and events; the secret is kept. A disabled endpoint is enabled again. */
  async update(scope: EnvScope, id: string, input: EndpointInput): Promise<EndpointView> {
    await this.endpoint(scope, id);
    const { url, events } = this.validate(input);
    await this.repo.updateEndpoint(scope, id, {
      url,
      events: JSON.stringify(events),
      disabled_at: null,
      disabled_reason: null,
      failing_since: null,
      updated_at: this.deps.clock.now().toISOString(),
    });
    return this.get(scope, id);
  }

  async delete(scope: EnvScope, id: string): Promise<void> {
    if (!(await this.repo.deleteEndpoint(scope, id))) throw endpointNotFound(id);
  }

  /** A new secret; the old one keeps signing (Standard Webhooks header) for 24 h. */
  async rotateSecret(scope: EnvScope, id: string): Promise<EndpointView> {
    const row = await this.endpoint(scope, id);
    const now = this.deps.clock.now();
    await this.repo.updateEndpoint(scope, id, {
      secret_enc: this.deps.secrets.encrypt(generateSecret()),
      previous_secret_enc: row.secret_enc,
      previous_secret_until: new Date(now.getTime() + ROTATION_OVERLAP_MS).toISOString(),
      updated_at: now.toISOString(),
    });
    return this.get(scope, id);
  }

  // --- the pingram SDK's single endpoint (/webhooks/events) --------------------------------

  async getEventsWebhook(scope: EnvScope): Promise<EndpointView> {
    const row = await this.repo.findSlot(scope, EVENTS_SLOT);
    if (!row) throw new AppError('NOT_FOUND', 'This environment has no events webhook.', 'Set one with PUT /webhooks/events {webhook, events}.');
    return this.view(row);
  }

  async upsertEventsWebhook(scope: EnvScope, input: EndpointInput): Promise<EndpointView> {
    const row = await this.repo.findSlot(scope, EVENTS_SLOT);
    if (row) return this.update(scope, row.id, input);
    try {
      return await this.create(scope, input, EVENTS_SLOT);
    } catch (err) {
      // Two first PUTs at once: the second finds the first's row.
      const again = await this.repo.findSlot(scope, EVENTS_SLOT);
      if (again) return this.update(scope, again.id, input);
      throw err;
    }
  }

  async deleteEventsWebhook(scope: EnvScope): Promise<void> {
    const row = await this.repo.findSlot(scope, EVENTS_SLOT);
    if (row) await this.repo.deleteEndpoint(scope, row.id);
  }

  // --- attempts, replay, recovery ---------------------------------------------------------

  async attempts(scope: EnvScope, endpointId: string, query: { cursor?: string; limit?: number; event?: string; failed?: boolean }): Promise<{ attempts: AttemptView[]; nextCursor?: string }> {
    await this.endpoint(scope, endpointId);
    if (query.event !== undefined && !isEventType(query.event)) throw invalid(`"${query.event}" is not an event name.`, `Use one of: ${EVENT_TYPES.join(', ')}.`);
    const limit = query.limit ?? 50;
    const rows = await this.repo.listAttempts(scope, endpointId, { eventType: query.event, failed: query.failed, before: idCursor(query.cursor), limit: limit + 1 });
    const page = rows.slice(0, limit);
    return { attempts: page.map(attemptView), ...(rows.length > limit ? { nextCursor: page[page.length - 1].id } : {}) };
  }

  /**
   * Sends one event to the endpoint again (same event id), whatever its earlier outcome, but
   * never while it is being posted to it (409): taking the delivery over then would post it
   * twice at once, both as the same attempt. Replays that find it already due again for a
   * replay add nothing, so a burst of them makes one attempt.
   */
  async replay(scope: EnvScope, endpointId: string, eventId: string): Promise<{ message: string }> {
    const endpoint = await this.endpoint(scope, endpointId);
    if (endpoint.disabled_at) throw new AppError('CONFLICT', `Webhook endpoint "${endpointId}" is disabled: ${endpoint.disabled_reason ?? ''}`, 'Update it (PUT) to enable it, then replay.');
    const event = await this.repo.findEvent(scope, eventId);
    if (!event) throw notFound('Webhook event', eventId);
    // An endpoint gets the event types it subscribed to, replays included.
    if (!(JSON.parse(endpoint.events) as string[]).includes(event.type)) {
      throw invalid(`Webhook endpoint "${endpointId}" is not subscribed to ${event.type}, the type of event ${eventId}.`, `Add ${event.type} to its events (PUT /webhooks/${endpointId}), then replay.`);
    }
    const now = this.deps.clock.now().toISOString();
    const inFlight = new AppError(
      'CONFLICT',
      `Event ${eventId} is being delivered to webhook endpoint "${endpointId}" now.`,
      `Replay it when the attempt ends (GET /webhooks/${endpointId}/attempts lists it).`,
    );
    // A restart refused because the delivery changed since it was read (a claim, an attempt) reads it again.
    for (let read = 0; read < 3; read++) {
      const delivery = await this.repo.findDelivery(endpointId, eventId);
      if (!delivery) {
        // A concurrent replay's row wins the (endpoint, event) pair; either one sends it.
        const first = pendingDelivery(this.deps.ids.uuid(), endpointId, { id: eventId, accountId: scope.accountId, envId: scope.envId, type: event.type }, now);
        await this.repo.insertDeliveries([{ ...first, restarted_by: 'replay' }]);
      } else if (isInFlight(delivery, now)) throw inFlight;
      else if (!awaitsReplay(delivery) && !(await this.repo.restartDelivery(delivery, now, 'replay'))) continue;
      this.worker.nudge();
      return { message: `Event ${eventId} will be sent to the endpoint again.` };
    }
    throw inFlight;
  }

  /** Sends again every event whose delivery to this endpoint failed, among those made since `since`. */
  async recover(scope: EnvScope, endpointId: string, since: string): Promise<{ recovered: number }> {
    const endpoint = await this.endpoint(scope, endpointId);
    if (endpoint.disabled_at) throw new AppError('CONFLICT', `Webhook endpoint "${endpointId}" is disabled: ${endpoint.disabled_reason ?? ''}`, 'Update it (PUT) to enable it, then recover.');
    const from = new Date(since);
    if (Number.isNaN(from.getTime())) throw invalid('since must be an ISO 8601 date-time.');
    const recovered = await this.repo.restartFailedSince(scope, endpointId, from.toISOString(), this.deps.clock.now().toISOString());
    this.worker.nudge();
    return { recovered };
  }

  // --- internals --------------------------------------------------------------------------

  private async endpoint(scope: EnvScope, id: string): Promise<WebhookEndpointRow> {
    const row = await this.repo.findEndpoint(scope, id);
    if (!row) throw endpointNotFound(id);
    return row;
  }

  private validate(input: EndpointInput): { url: string; events: string[] } {
    const raw = typeof input.webhook === 'string' ? input.webhook.trim() : '';
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw invalid(`webhook "${raw.slice(0, 200)}" is not a valid URL.`, 'Give an absolute http(s) URL, e.g. https://example.com/webhooks.');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(`webhook must be an http(s) URL, not ${url.protocol}`, 'Give an absolute http(s) URL.');
    // Kept as given, so that what a client set is what it reads back (the SDK's upsert then get);
    // requests go to the parsed form. Whitespace and control characters are refused rather than
    // quietly encoded: `https://example.com/a b` is most likely a pasting slip.
    if (/\s/.test(raw) || [...raw].some((c) => c < ' ' || c === '\u007f')) throw invalid('webhook must not contain spaces or control characters.', 'Percent-encode them (a space is %20), or check the URL for a pasting slip.');
    if (raw.length > MAX_URL_LENGTH) throw invalid(`webhook is longer than ${MAX_URL_LENGTH} characters.`);
    if (url.username || url.password) throw invalid('webhook must not carry credentials in the URL.', 'Verify deliveries with the signature headers instead.');
    // Names are checked when each request is made (DNS can change); an address can be refused now.
    const reason = blockedReason(url.hostname, this.deps.config.allowPrivateNetworks);
    if (reason && reason !== 'not an IP address') throw invalid(`webhook points at ${url.hostname}, a ${reason}.`, 'Give a URL on the public internet.');
    if (!Array.isArray(input.events) || input.events.length === 0) throw invalid('events must be a non-empty list of event names.', `Use any of: ${EVENT_TYPES.join(', ')}.`);
    for (const name of input.events) {
      if (typeof name !== 'string' || !isEventType(name)) throw invalid(`"${String(name)}" is not an event name.`, `Use any of: ${EVENT_TYPES.join(', ')}.`);
    }
    return { url: raw, events: [...new Set(input.events)] };
  }

  private view(row: WebhookEndpointRow): EndpointView {
    return {
      id: row.id,
      webhook: row.url,
      events: JSON.parse(row.events) as string[],
      secret: this.deps.secrets.decrypt(row.secret_enc),
      ...(row.disabled_at ? { disabled: true, disabledAt: row.disabled_at, disabledReason: row.disabled_reason ?? '' } : {}),
      ...(row.failing_since ? { failingSince: row.failing_since } : {}),
    };
  }
}

/** Claimed and its lease still running: a worker is posting it (or about to). */
function isInFlight(delivery: WebhookDeliveryRow, now: string): boolean {
  return delivery.status === 'pending' && delivery.lease !== null && delivery.next_attempt_at > now;
}

/** Restarted by a replay or recovery whose first attempt has not been made yet. */
function awaitsReplay(delivery: WebhookDeliveryRow): boolean {
  return delivery.status === 'pending' && delivery.lease === null && delivery.restarted_by !== null && Number(delivery.round_attempts) === 0;
}

function endpointNotFound(id: string): AppError {
  return notFound('Webhook endpoint', id, 'List the endpoints of this environment with GET /webhooks.');
}

function attemptView(row: WebhookAttemptRow): AttemptView {
  return {
    id: row.id,
    eventId: row.event_id,
    eventType: row.event_type,
    attempt: row.attempt,
    at: row.at,
    success: Number(row.success) === 1,
    statusCode: row.status_code === null ? null : Number(row.status_code),
    durationMs: Number(row.duration_ms),
    response: row.response,
    error: row.error,
    nextAttemptAt: row.next_attempt_at,
    trigger: row.trigger,
  };
}

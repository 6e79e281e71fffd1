import type { Updateable } from 'kysely';
import type { Logger } from 'pino';
import type { Clock, Ids } from '../../clock.js';
import type { DeliveryLedger } from '../delivery/ledger.js';
import { DISABLE_AFTER_MS, nextDelayMs, parseRetryAfter } from './schedule.js';
import { webhookLogFields } from './webhook-log-fields.js';
import type { PostResult } from './webhook-sender.js';
import type { ClaimedDelivery, WebhooksRepository } from './webhooks.repository.js';
import type { AttemptTrigger, WebhookAttemptsTable, WebhookDeliveriesTable } from './webhooks.tables.js';

/** One finished request of a claimed delivery, waiting to be recorded. */
export interface Outcome {
  claim: ClaimedDelivery;
  lease: string;
  at: Date;
  result: PostResult;
}

interface EndpointHealth {
  success: boolean;
  failedAt: string | null;
  gone: string | null;
  lastError: string | null;
}

/** A settled delivery's fields for its message's log (webhook-log-fields.ts). */
interface LogOutcome {
  trackingId: string;
  accountId: string;
  envId: string;
  channel: string;
  fields: Record<string, unknown>;
}

/**
 * Records a batch of outcomes in the caller's transaction: every attempt row, the deliveries'
 * new states (successes one UPDATE per claim, fenced by its lease; failures rescheduled on the
 * retry schedule or failed), the endpoints' health where it changed, and, for deliveries that
 * settled (a 2xx, or a failure with no retry left) of an event of a message, what the endpoint
 * answered in that message's log (`*_webhook_res`, `*_webhook_delivered`): written by the
 * delivery ledger, the one writer of deliveries, in one statement per batch.
 */
export class OutcomeRecorder {
  constructor(
    private readonly deps: { clock: Clock; ids: Ids; logger: Logger; ledger: Pick<DeliveryLedger, 'session'> },
    private readonly random: () => number,
  ) {}

  async record(repo: WebhooksRepository, all: Outcome[]): Promise<void> {
    // An outcome of an endpoint deleted while it was in flight changes nothing: its attempt row
    // would fail the foreign key and take the rest of the batch down with it.
    const endpoints = new Set<string>();
    for (const o of all) endpoints.add(o.claim.endpoint_id);
    const live = await repo.liveEndpoints([...endpoints]);
    const batch = live.size === endpoints.size ? all : all.filter((o) => live.has(o.claim.endpoint_id));
    if (batch.length < all.length) this.deps.logger.info({ dropped: all.length - batch.length }, 'webhooks: results of deleted endpoints dropped');
    const attempts: WebhookAttemptsTable[] = [];
    const health = new Map<string, EndpointHealth>();
    /** Successes by claim: one UPDATE per claim (the lease fences a claim that ran out). */
    const succeeded = new Map<string, { ids: string[]; at: string }>();
    const settles: { id: string; lease: string; patch: Updateable<WebhookDeliveriesTable> }[] = [];
    const logs: LogOutcome[] = [];
    let healthNeeded = false;
    for (const { claim, lease, at, result } of batch) {
      const iso = at.toISOString();
      const attempt = claim.attempts + 1;
      const round = claim.round_attempts + 1;
      const code = result.statusCode;
      const success = code !== null && code >= 200 && code < 300;
      const gone = code === 410;
      const error = success ? null : (result.error ?? `HTTP ${code}${code !== null && code >= 300 && code < 400 ? ' (redirects are not followed)' : ''}`);
      const delay = success || gone ? null : nextDelayMs(round, code === 429 || code === 503 ? parseRetryAfter(result.headers['retry-after'], at) : null, this.random);
      const next = delay === null ? null : new Date(at.getTime() + delay).toISOString();
      attempts.push({
        id: this.deps.ids.uuid(),
        delivery_id: claim.id,
        endpoint_id: claim.endpoint_id,
        event_id: claim.event_id,
        event_type: claim.event_type,
        account_id: claim.account_id,
        env_id: claim.env_id,
        attempt,
        at: iso,
        success: success ? 1 : 0,
        status_code: code,
        duration_ms: result.durationMs,
        response: result.body || null,
        error,
        next_attempt_at: next,
        trigger: triggerOf(claim),
      });
      // Settled: with several endpoints on one event, the last settled attempt's answer is kept.
      if (claim.tracking_id && (success || next === null)) {
        const log = webhookLogFields(claim.event_type, success, result);
        if (log) logs.push({ trackingId: claim.tracking_id, accountId: claim.account_id, envId: claim.env_id, ...log });
      }
      if (success) {
        const group = succeeded.get(lease) ?? { ids: [], at: iso };
        group.ids.push(claim.id);
        if (iso > group.at) group.at = iso;
        succeeded.set(lease, group);
      } else {
        settles.push({
          id: claim.id,
          lease,
          patch: { status: next ? 'pending' : 'failed', attempts: attempt, round_attempts: round, next_attempt_at: next ?? iso, lease: null, last_attempt_at: iso, last_error: error, updated_at: iso },
        });
      }
      const h = health.get(claim.endpoint_id) ?? { success: false, failedAt: null, gone: null, lastError: null };
      if (success) h.success = true;
      else {
        h.failedAt ??= iso;
        h.lastError = error;
        if (gone) h.gone = iso;
      }
      health.set(claim.endpoint_id, h);
      // An endpoint that was fine and still is needs no write.
      if (!success || claim.failing_since !== null) healthNeeded = true;
    }
    await repo.insertAttempts(attempts);
    for (const [lease, group] of succeeded) await repo.markSucceeded(group.ids, lease, group.at);
    for (const s of settles) await repo.settleDelivery(s.id, s.lease, s.patch);
    if (healthNeeded) logs.push(...(await this.updateHealth(repo, health)));
    if (logs.length > 0) {
      const ledger = this.deps.ledger.session(repo.executor());
      await ledger.mergeMessageDetails(logs, this.deps.clock.now().toISOString());
      await ledger.flush();
    }
  }

  /**
   * Endpoint health: a success clears failing_since; a failure starts it; an endpoint failing
   * for five days, or answering 410 Gone, is disabled with the reason shown on it, and its
   * pending deliveries fail (POST /webhooks/{id}/recover sends them again once it is fixed).
   * Answers those failed deliveries' log fields: settled too, with the reason as the answer.
   */
  private async updateHealth(repo: WebhooksRepository, health: Map<string, EndpointHealth>): Promise<LogOutcome[]> {
    const now = this.deps.clock.now();
    const logs: LogOutcome[] = [];
    for (const row of await repo.endpointsHealth([...health.keys()])) {
      const h = health.get(row.id)!;
      if (row.disabled_at) continue;
      let reason: string | null = null;
      if (h.gone) reason = `The endpoint answered 410 Gone at ${h.gone}; it was disabled. Update it (PUT) to enable it again.`;
      else if (!h.success && row.failing_since && now.getTime() - Date.parse(row.failing_since) >= DISABLE_AFTER_MS) {
        reason = `Every attempt failed since ${row.failing_since} (5 days); last error: ${h.lastError}. Update it (PUT) to enable it again.`;
      }
      if (reason) {
        const at = now.toISOString();
        await repo.setEndpointHealth(row.id, { disabled_at: at, disabled_reason: reason.slice(0, 1000) });
        for (const failed of await repo.failPending(row.id, 'endpoint disabled', at)) {
          const log = failed.tracking_id && webhookLogFields(failed.event_type, false, { statusCode: null, headers: {}, body: '', durationMs: 0, error: `ENDPOINT_DISABLED: ${reason}` });
          if (log) logs.push({ trackingId: failed.tracking_id!, accountId: failed.account_id, envId: failed.env_id, ...log });
        }
        this.deps.logger.warn({ endpointId: row.id }, 'webhooks: endpoint disabled');
      } else if (h.success && row.failing_since) await repo.setEndpointHealth(row.id, { failing_since: null });
      else if (!h.success && !row.failing_since) await repo.setEndpointHealth(row.id, { failing_since: h.failedAt });
    }
    return logs;
  }
}

function triggerOf(claim: ClaimedDelivery): AttemptTrigger {
  if (claim.round_attempts > 0) return 'retry';
  // attempts > 0 with no restarted_by: restarted before migration 0095 said by what.
  return claim.restarted_by !== null || claim.attempts > 0 ? 'replay' : 'event';
}

import type { Kysely, Updateable } from 'kysely';
import type { Logger } from 'pino';
import type { Dialect } from '../../storage/db.js';
import type { CoreTables } from '../../storage/schema.js';
import type { AttemptRow, DeliveriesTable, DeliveryRow, MessagesTable } from '../sending/sending.tables.js';
import type { DeliveryEventsTable } from './delivery.tables.js';
import { type DeliveryIdentity, type EngagedDelivery, LedgerRepository, type MessageIdentity } from './ledger.repository.js';
import { type LedgerMark, type LedgerReport, ReportBuffer } from './ledger-report.js';
import {
  DELIVERY_TRANSITIONS,
  type DeliveryStatus,
  MESSAGE_TRANSITIONS,
  type MessageState,
  NEW,
  type TransitionKind,
  allowedFrom,
  deliveryTransitionAllowed,
  messageTransitionAllowed,
  transitionAllowed,
} from './transitions.js';

/** What a transition writes besides the state: the row's other columns, and its event's code and details. */
export interface Change<T> {
  at: string;
  patch?: Updateable<T>;
  code?: string | null;
  details?: Record<string, unknown> | null;
}

/** An applied transition waiting for its id (given out at flush, just before commit). */
type PendingEvent = Omit<DeliveryEventsTable, 'id'>;

/** How a message that failed for good is recorded. */
export interface MessageFailure {
  at: string;
  code: string;
  reason: string;
}

/** A provider call (or local delivery) that succeeded. */
export interface DeliverySuccess {
  /** The channel confirmed receipt itself (in-app). */
  delivered?: boolean;
  at: string;
  providerMessageId?: string | null;
  extra?: Record<string, unknown> | null;
}

export interface DeliveryFailure {
  at: string;
  code: string;
  reason: string;
  /** Channel log fields of the failure (e.g. email_failed_recipient). */
  extra?: Record<string, unknown>;
}

/** Delivery statuses an open or a click is recorded on: sent, or still pending (its `sent` not committed yet). */
const ENGAGEABLE = new Set(['pending', 'sent', 'delivered']);

/** An open or a click of a sent email, as recordEngagement merges it into the log. */
export type Engagement =
  | { kind: 'open'; at: string; userAgent?: string; ip?: string }
  | { kind: 'click'; at: string; userAgent?: string; ip?: string; link: string; tags?: Record<string, string[]> };

/** A provider call and what it does to its delivery, as recordAttempts writes it. */
export type AttemptOutcome =
  | { kind: 'sent'; deliveryId: string; attempt: AttemptRow; success: DeliverySuccess }
  | { kind: 'retry'; deliveryId: string; attempt: AttemptRow; at: string; /** When the next attempt is due. */ retryAt?: string }
  | { kind: 'failed'; deliveryId: string; attempt: AttemptRow; failure: DeliveryFailure };

/** The delivery columns of a successful provider call made on attempt `attempts`. */
export function successFields(success: DeliverySuccess, attempts: number): Pick<DeliveryRow, 'status' | 'attempts' | 'sent_at' | 'delivered_at' | 'provider_message_id' | 'extra' | 'updated_at'> {
  return {
    status: success.delivered ? 'delivered' : 'sent',
    attempts,
    sent_at: success.at,
    delivered_at: success.delivered ? success.at : null,
    provider_message_id: success.providerMessageId ?? null,
    extra: success.extra ? JSON.stringify(success.extra) : null,
    updated_at: success.at,
  };
}

/**
 * The ledger inside one transaction: every write of a message's life after acceptance goes
 * through here. Each applied transition is buffered as an event; flush() gives the events their
 * ids and writes them, and must be the last thing before commit (DeliveryLedger.transaction does
 * it). A refused transition writes nothing and is logged.
 */
export class LedgerSession {
  private readonly repo: LedgerRepository;
  private events: PendingEvent[] = [];
  /** The events flush() wrote, for the report. */
  private written: DeliveryEventsTable[] = [];
  private readonly reported = new ReportBuffer();

  constructor(
    /** The transaction: callers make their own writes of the same unit (jobs, in-app rows) with it. */
    readonly db: Kysely<CoreTables>,
    dialect: Dialect,
    private readonly logger: Logger,
  ) {
    this.repo = new LedgerRepository(db, dialect);
  }

  // --- messages ---------------------------------------------------------------------------

  /** queued | scheduled -> processed, with the channels routing skipped. False: it was not in `message.state` any more. */
  async markProcessed(message: MessageIdentity & { state: string }, done: { at: string; skipped: Record<string, string> }): Promise<boolean> {
    const moved = await this.changeMessages([message.tracking_id], message.state as MessageState, 'processed', {
      patch: { processed_at: done.at, skipped: JSON.stringify(done.skipped) },
      at: done.at,
      details: Object.keys(done.skipped).length > 0 ? { skipped: done.skipped } : null,
    });
    return moved.length > 0;
  }

  /**
   * markProcessed for many messages processed at the same time `at`: one UPDATE per group of
   * messages in the same state with the same skipped channels (usually one for a batch). Returns
   * the tracking ids moved.
   */
  async markProcessedMany(items: { message: MessageIdentity & { state: string }; skipped: Record<string, string> }[], at: string): Promise<Set<string>> {
    const groups = new Map<string, { from: string; skipped: Record<string, string>; ids: string[] }>();
    for (const { message, skipped } of items) {
      const json = JSON.stringify(skipped);
      const key = `${message.state}\u0000${json}`;
      const group = groups.get(key);
      if (group) group.ids.push(message.tracking_id);
      else groups.set(key, { from: message.state, skipped, ids: [message.tracking_id] });
    }
    const moved = new Set<string>();
    for (const { from, skipped, ids } of groups.values()) {
      const changed = await this.changeMessages(ids, from as MessageState, 'processed', {
        patch: { processed_at: at, skipped: JSON.stringify(skipped) },
        at,
        details: Object.keys(skipped).length > 0 ? { skipped } : null,
      });
      for (const m of changed) moved.add(m.tracking_id);
    }
    return moved;
  }

  /** Fails, with a code and reason, those of these messages still queued or scheduled; returns their ids. */
  async failMessages(trackingIds: string[], failure: MessageFailure): Promise<string[]> {
    const patch: Updateable<MessagesTable> = {
      processed_at: failure.at,
      failed_at: failure.at,
      failed_code: failure.code,
      failed_internal: failure.reason.slice(0, 1000),
    };
    let remaining = [...new Set(trackingIds)];
    const failed: string[] = [];
    for (const from of allowedFrom(MESSAGE_TRANSITIONS, 'failed')) {
      if (remaining.length === 0) break;
      const moved = await this.changeMessages(remaining, from, 'failed', { patch, at: failure.at, code: failure.code }, false);
      const ids = new Set(moved.map((m) => m.tracking_id));
      failed.push(...ids);
      remaining = remaining.filter((id) => !ids.has(id));
    }
    await this.explainMessages(remaining, 'failed');
    return failed;
  }

  /** scheduled -> scheduled: a schedule update (new body, time or job). */
  async reschedule(trackingId: string, patch: Pick<Updateable<MessagesTable>, 'request' | 'job_id' | 'scheduled_for' | 'schedule_updated_to'>, at: string): Promise<boolean> {
    const moved = await this.changeMessages([trackingId], 'scheduled', 'scheduled', {
      patch: { ...patch, schedule_updated_at: at },
      at,
      details: { scheduledFor: patch.scheduled_for ?? null },
    });
    return moved.length > 0;
  }

  /** scheduled -> canceled: the schedule was deleted before it ran. */
  async cancelScheduled(trackingId: string, at: string): Promise<boolean> {
    const moved = await this.changeMessages([trackingId], 'scheduled', 'canceled', { patch: { schedule_deleted_at: at }, at });
    return moved.length > 0;
  }

  // --- retract ----------------------------------------------------------------------------

  /**
   * Retracts these messages (POST /{clientId}/sender/retract): those not processed yet (queued,
   * scheduled) become `retracted` and will make no deliveries; their deliveries still pending, or
   * collected in a digest not sent yet (which they then drop out of), become `retracted` (their jobs find nothing to do), and so do their in-app deliveries (the
   * caller removes the notifications in this transaction). What another channel sent or
   * delivered stays as it is. Each retracted delivery gets `<channel>_retracted_at` in its log.
   */
  async retract(trackingIds: string[], at: string): Promise<{ messages: string[]; deliveries: DeliveryIdentity[] }> {
    let remaining = [...new Set(trackingIds)];
    const messages: string[] = [];
    for (const from of allowedFrom(MESSAGE_TRANSITIONS, 'retracted')) {
      if (remaining.length === 0) break;
      const moved = new Set((await this.changeMessages(remaining, from, 'retracted', { patch: {}, at }, false)).map((m) => m.tracking_id));
      messages.push(...moved);
      remaining = remaining.filter((id) => !moved.has(id));
    }
    const deliveries: DeliveryIdentity[] = [];
    for (const d of await this.repo.deliveriesOf(trackingIds)) {
      if (!retractable(d)) continue;
      const extra = JSON.stringify({ [`${d.channel}_retracted_at`]: at });
      if (await this.changeDelivery(d.id, d.status as DeliveryStatus, 'retracted', { updated_at: at, extra }, at, null)) deliveries.push(d);
    }
    return { messages, deliveries };
  }

  // --- deliveries -------------------------------------------------------------------------

  /**
   * Creates a message's deliveries (new -> their status; a delivery made in this transaction,
   * in-app, goes new -> pending -> delivered) with the attempts already made. A delivery already
   * present (a re-run) is left alone and records nothing.
   */
  async insertDeliveries(rows: DeliveryRow[], attempts: AttemptRow[] = []): Promise<void> {
    const valid = rows.filter((row) => {
      const path = creationPath(row.status);
      const ok = path.every(([from, to]) => deliveryTransitionAllowed(from, to));
      if (!ok) this.refuse('delivery', NEW, row.status, { trackingId: row.tracking_id, deliveryId: row.id });
      return ok;
    });
    const inserted = await this.repo.insertDeliveries(valid);
    const byId = new Map<string, DeliveryRow>();
    for (const row of valid) {
      if (!inserted.has(row.id)) continue;
      byId.set(row.id, row);
      if (row.status === 'failed') this.reported.reason(row.id, row.failed_internal);
      for (const [from, to] of creationPath(row.status)) this.record('delivery', row, from, to, timeOf(row, to), to === 'failed' ? row.failed_code : null, null);
    }
    const made = attempts.filter((a) => inserted.has(a.delivery_id));
    await this.repo.insertAttempts(made);
    for (const a of made) this.reported.attempt(byId.get(a.delivery_id)!, a);
  }

  /**
   * The provider calls of a batch: every attempt in one INSERT, then each delivery's change as
   * deliverySucceeded, deliveryRetrying or deliveryFailed make it. Returns, per outcome, whether
   * its delivery changed.
   */
  async recordAttempts(outcomes: AttemptOutcome[]): Promise<boolean[]> {
    await this.repo.insertAttempts(outcomes.map((o) => o.attempt));
    const sent = outcomes.filter((o): o is Extract<AttemptOutcome, { kind: 'sent' }> => o.kind === 'sent');
    // Two or more successes: one UPDATE for all of them (measured: one per delivery was the
    // largest statement count of a batch), their transitions checked and recorded as one by one.
    const moved = sent.length > 1 ? await this.succeededMany(sent) : null;
    const changed: boolean[] = [];
    for (const o of outcomes) {
      let delivery: DeliveryIdentity | undefined;
      if (o.kind === 'sent') delivery = moved ? await this.settledSuccess(o, moved) : await this.succeeded(o.deliveryId, o.attempt, o.success);
      else if (o.kind === 'retry') delivery = await this.retrying(o.deliveryId, o.attempt, o.at);
      else delivery = await this.failed(o.deliveryId, o.attempt, o.failure);
      if (delivery) this.reported.attempt(delivery, o.attempt, o.kind === 'retry' ? o.retryAt : undefined);
      changed.push(delivery !== undefined);
    }
    return changed;
  }

  /** pending -> sent | delivered for several successful calls in one UPDATE; returns the deliveries moved, by id. */
  private async succeededMany(outcomes: Extract<AttemptOutcome, { kind: 'sent' }>[]): Promise<Map<string, DeliveryIdentity>> {
    const rows = outcomes
      .map((o) => ({ id: o.deliveryId, ...successFields(o.success, o.attempt.attempt) }))
      .filter((row) => deliveryTransitionAllowed('pending', row.status));
    const moved = await this.repo.updateDeliveriesFrom(rows, 'pending');
    return new Map(moved.map((d) => [d.id, d]));
  }

  /** Records the transition succeededMany made for one outcome, or says why it made none. */
  private async settledSuccess(o: Extract<AttemptOutcome, { kind: 'sent' }>, moved: Map<string, DeliveryIdentity>): Promise<DeliveryIdentity | undefined> {
    const to = successFields(o.success, o.attempt.attempt).status;
    if (!deliveryTransitionAllowed('pending', to)) {
      this.refuse('delivery', 'pending', to, { deliveryId: o.deliveryId });
      return undefined;
    }
    const row = moved.get(o.deliveryId);
    if (row) {
      this.record('delivery', row, 'pending', to, o.success.at, null, null);
      return row;
    }
    const current = await this.repo.deliveryStatus(o.deliveryId);
    if (current !== undefined) this.notApplied('delivery', current, to, { deliveryId: o.deliveryId });
    return undefined;
  }

  /** pending -> sent | delivered after a successful provider call (the attempt is recorded too). */
  async deliverySucceeded(deliveryId: string, attempt: AttemptRow, success: DeliverySuccess): Promise<boolean> {
    return (await this.recordAttempts([{ kind: 'sent', deliveryId, attempt, success }]))[0];
  }

  /** A failed attempt that will be retried: the delivery stays pending (no transition, no event). */
  async deliveryRetrying(deliveryId: string, attempt: AttemptRow, at: string): Promise<boolean> {
    return (await this.recordAttempts([{ kind: 'retry', deliveryId, attempt, at }]))[0];
  }

  /** pending -> failed: the last attempt failed (recorded with it), or the job was given up (no attempt). */
  async deliveryFailed(deliveryId: string, attempt: AttemptRow | null, failure: DeliveryFailure): Promise<boolean> {
    if (attempt) return (await this.recordAttempts([{ kind: 'failed', deliveryId, attempt, failure }]))[0];
    return (await this.failed(deliveryId, null, failure)) !== undefined;
  }

  private succeeded(deliveryId: string, attempt: AttemptRow, success: DeliverySuccess): Promise<DeliveryIdentity | undefined> {
    const fields = successFields(success, attempt.attempt);
    return this.changeDelivery(deliveryId, 'pending', fields.status, fields, success.at, null);
  }

  private retrying(deliveryId: string, attempt: AttemptRow, at: string): Promise<DeliveryIdentity | undefined> {
    return this.repo.updateDeliveryFrom(deliveryId, 'pending', { attempts: attempt.attempt, updated_at: at });
  }

  private failed(deliveryId: string, attempt: AttemptRow | null, failure: DeliveryFailure): Promise<DeliveryIdentity | undefined> {
    const patch: Updateable<DeliveriesTable> = {
      status: 'failed',
      failed_at: failure.at,
      failed_code: failure.code,
      failed_internal: failure.reason.slice(0, 1000),
      updated_at: failure.at,
      ...(attempt ? { attempts: attempt.attempt } : {}),
      ...(failure.extra ? { extra: JSON.stringify(failure.extra) } : {}),
    };
    return this.changeDelivery(deliveryId, 'pending', 'failed', patch, failure.at, failure.code);
  }

  /**
   * Applies the waiting provider reports for one provider message id, in the order they were
   * made: each one the table allows moves the delivery (sent -> delivered | failed) and merges
   * its log fields; one it does not (a "failed" after "delivered") is refused. Every report is
   * marked handled. Returns the delivery when a report was applied.
   */
  async applyProviderReports(channel: string, providerMessageId: string, now: string): Promise<DeliveryRow | null> {
    const delivery = await this.repo.deliveryByProviderIdForUpdate(channel, providerMessageId);
    if (!delivery) return null;
    const reports = await this.repo.unappliedProviderEvents(channel, providerMessageId);
    if (reports.length === 0) return null;
    let status: DeliveryStatus = delivery.status;
    let extra: Record<string, unknown> = delivery.extra ? (JSON.parse(delivery.extra) as Record<string, unknown>) : {};
    const patch: Partial<DeliveryRow> = {};
    const applied: { from: DeliveryStatus; to: DeliveryStatus; at: string; code: string | null }[] = [];
    for (const report of reports) {
      if (!deliveryTransitionAllowed(status, report.status)) {
        this.refuse('delivery', status, report.status, { trackingId: delivery.tracking_id, deliveryId: delivery.id, providerEventId: report.id });
        continue;
      }
      if (report.extra) extra = { ...extra, ...(JSON.parse(report.extra) as Record<string, unknown>) };
      if (report.status === 'delivered') Object.assign(patch, { status: 'delivered', delivered_at: report.at });
      else {
        Object.assign(patch, { status: 'failed', failed_at: report.at, failed_code: report.code, failed_internal: report.internal });
        this.reported.reason(delivery.id, report.internal);
      }
      applied.push({ from: status, to: report.status, at: report.at, code: report.status === 'failed' ? report.code : null });
      status = report.status;
    }
    if (applied.length > 0) {
      const values = { ...patch, extra: Object.keys(extra).length ? JSON.stringify(extra) : null, updated_at: now };
      const changed = await this.repo.updateDeliveryFrom(delivery.id, delivery.status, values);
      // Unreachable while the delivery is locked (or SQLite serializes writers); if it happens, the reports stay waiting.
      if (!changed) throw new Error(`delivery ${delivery.id} changed while its provider reports were applied`);
      for (const a of applied) this.record('delivery', delivery, a.from, a.to, a.at, a.code, null);
    }
    await this.repo.markProviderEventsApplied(reports.map((r) => r.id), now);
    return applied.length > 0 ? { ...delivery, ...patch, extra: Object.keys(extra).length ? JSON.stringify(extra) : null, updated_at: now } : null;
  }

  /** Merges log fields into a delivery's `extra` (inbound replies, call details) without a transition. */
  async mergeDeliveryDetails(deliveryId: string, fields: Record<string, unknown>, at: string): Promise<boolean> {
    const row = await this.repo.deliveryExtraForUpdate(deliveryId);
    if (!row) return false;
    const extra = { ...(row.extra ? (JSON.parse(row.extra) as Record<string, unknown>) : {}), ...fields };
    await this.repo.setDeliveryExtra(deliveryId, JSON.stringify(extra), at);
    return true;
  }

  /**
   * Merges log fields into messages' deliveries found by tracking id and channel, all in one
   * statement, without a read or a transition (the webhook worker's outcomes: a settled
   * delivery's `*_webhook_res` fields, batched with its attempts). Fields for the same delivery
   * are merged here first, later ones winning.
   */
  async mergeMessageDetails(items: { trackingId: string; accountId: string; envId: string; channel: string; fields: Record<string, unknown> }[], at: string): Promise<void> {
    const byDelivery = new Map<string, { identity: MessageIdentity & { channel: string }; fields: Record<string, unknown> }>();
    for (const item of items) {
      const key = `${item.accountId}\n${item.envId}\n${item.trackingId}\n${item.channel}`;
      const entry = byDelivery.get(key);
      if (entry) Object.assign(entry.fields, item.fields);
      else byDelivery.set(key, { identity: { tracking_id: item.trackingId, account_id: item.accountId, env_id: item.envId, channel: item.channel }, fields: { ...item.fields } });
    }
    await this.repo.mergeExtraByMessage([...byDelivery.values()].map((e) => ({ ...e.identity, extra: JSON.stringify(e.fields) })), at);
  }

  /** mergeDeliveryDetails for a message's delivery on `channel` in `envId` (an unsubscribe on its email's log). */
  async mergeChannelDetails(trackingId: string, envId: string, channel: string, fields: Record<string, unknown>, at: string): Promise<boolean> {
    const deliveryId = await this.repo.deliveryIdOf(trackingId, envId, channel);
    return deliveryId ? this.mergeDeliveryDetails(deliveryId, fields, at) : false;
  }

  /**
   * Records an engagement with a sent email (an open or a click) in its log fields, without a
   * transition: the first one's fields (`email_opened_at`, `_user_agent`, `_ip`; for clicks also
   * `_link`, `_link_tags`) are kept, and every one, the first included, sets `<prefix>_last_at`
   * (clicks: `email_clicked_last_link`) and counts in `<prefix>_count`. Returns the delivery, or
   * undefined when there is none in `envId` on channel email that was sent or is being sent.
   * A pending delivery counts: the receiving server has the mail (its reader has the token) a
   * moment before the worker commits `sent`, and that commit merges its fields into these
   * (LedgerRepository.mergedExtra) instead of replacing them.
   */
  async recordEngagement(deliveryId: string, envId: string, engagement: Engagement): Promise<EngagedDelivery | undefined> {
    const row = await this.repo.deliveryForEngagementForUpdate(deliveryId);
    if (!row || row.env_id !== envId || row.channel !== 'email' || !ENGAGEABLE.has(row.status)) return undefined;
    const extra = row.extra ? (JSON.parse(row.extra) as Record<string, unknown>) : {};
    const prefix = engagement.kind === 'open' ? 'email_opened' : 'email_clicked';
    if (extra[`${prefix}_at`] === undefined) {
      extra[`${prefix}_at`] = engagement.at;
      if (engagement.userAgent) extra[`${prefix}_user_agent`] = engagement.userAgent;
      if (engagement.ip) extra[`${prefix}_ip`] = engagement.ip;
      if (engagement.kind === 'click') {
        extra.email_clicked_link = engagement.link;
        if (engagement.tags) extra.email_clicked_link_tags = JSON.stringify(engagement.tags);
      }
    }
    extra[`${prefix}_last_at`] = engagement.at;
    if (engagement.kind === 'click') extra.email_clicked_last_link = engagement.link;
    extra[`${prefix}_count`] = (typeof extra[`${prefix}_count`] === 'number' ? (extra[`${prefix}_count`] as number) : 0) + 1;
    const json = JSON.stringify(extra);
    await this.repo.setDeliveryExtra(deliveryId, json, engagement.at);
    return { ...row, extra: json };
  }

  // --- any transition ---------------------------------------------------------------------

  /**
   * Moves a message into `to` from the state it is in, when the table allows that: the general
   * form of the methods above, for transitions without one of their own (and the reserved states,
   * once the table lets something reach them).
   */
  async transitionMessage(trackingId: string, to: MessageState, change: Change<MessagesTable>): Promise<boolean> {
    const [current] = await this.repo.messageStates([trackingId]);
    if (!current) return false;
    const moved = await this.changeMessages([trackingId], current.state as MessageState, to, { patch: change.patch ?? {}, at: change.at, code: change.code ?? undefined, details: change.details ?? null });
    return moved.length > 0;
  }

  /** Moves a delivery into `to` from the status it is in, when the table allows that. */
  async transitionDelivery(deliveryId: string, to: DeliveryStatus, change: Change<DeliveriesTable>): Promise<boolean> {
    const current = await this.repo.deliveryStatus(deliveryId);
    if (current === undefined) return false;
    return (await this.changeDelivery(deliveryId, current as DeliveryStatus, to, { updated_at: change.at, ...change.patch }, change.at, change.code ?? null, change.details ?? null)) !== undefined;
  }

  // --- events -----------------------------------------------------------------------------

  /** A mark to roll the buffered events (and reported attempts) back to, with a savepoint. */
  checkpoint(): LedgerMark {
    return { events: this.events.length, attempts: this.reported.attemptCount };
  }

  /** Drops the events and attempts recorded since `mark` (their savepoint was rolled back). */
  rollbackTo(mark: LedgerMark): void {
    this.events.length = Math.min(mark.events, this.events.length);
    this.reported.rollbackTo(mark.attempts);
  }

  /** What this session wrote, once flushed: for DeliveryLedger to report after the commit. */
  report(): LedgerReport {
    return this.reported.report(this.written);
  }

  /**
   * Writes the buffered events: takes each environment's ids (its counter row, in environment
   * order so two transactions never wait on each other's counters) and inserts them all. Last
   * in the transaction: the counter row stays locked until commit.
   */
  async flush(): Promise<void> {
    if (this.events.length === 0) return;
    const byEnv = new Map<string, PendingEvent[]>();
    for (const event of this.events) {
      const list = byEnv.get(event.env_id);
      if (list) list.push(event);
      else byEnv.set(event.env_id, [event]);
    }
    const rows: DeliveryEventsTable[] = [];
    for (const envId of [...byEnv.keys()].sort()) {
      const list = byEnv.get(envId)!;
      const last = await this.repo.reserveEventIds(envId, list.length);
      let id = last - list.length;
      for (const event of list) rows.push({ ...event, id: ++id });
    }
    await this.repo.insertEvents(rows);
    this.written = this.written.length === 0 ? rows : [...this.written, ...rows];
    this.events = [];
  }

  // --- internals --------------------------------------------------------------------------

  /** Moves messages from `from` to `to` when the table allows it; returns those moved. */
  private async changeMessages(
    trackingIds: string[],
    from: MessageState,
    to: MessageState,
    change: { patch: Updateable<MessagesTable>; at: string; code?: string; details?: Record<string, unknown> | null },
    explain = true,
  ): Promise<MessageIdentity[]> {
    if (!messageTransitionAllowed(from, to)) {
      for (const trackingId of trackingIds) this.refuse('message', from, to, { trackingId });
      return [];
    }
    const moved = await this.repo.updateMessagesFrom(trackingIds, from, { ...change.patch, state: to as MessagesTable['state'] });
    for (const m of moved) {
      if (to === 'failed' && typeof change.patch.failed_internal === 'string') this.reported.reason(m.tracking_id, change.patch.failed_internal);
      this.record('message', m, from, to, change.at, change.code ?? null, change.details ?? null);
    }
    if (explain && moved.length < trackingIds.length) {
      const ids = new Set(moved.map((m) => m.tracking_id));
      await this.explainMessages(trackingIds.filter((id) => !ids.has(id)), to);
    }
    return moved;
  }

  private async changeDelivery(
    deliveryId: string,
    from: DeliveryStatus,
    to: DeliveryStatus,
    patch: Updateable<DeliveriesTable>,
    at: string,
    code: string | null,
    details: Record<string, unknown> | null = null,
  ): Promise<DeliveryIdentity | undefined> {
    if (!deliveryTransitionAllowed(from, to)) {
      this.refuse('delivery', from, to, { deliveryId });
      return undefined;
    }
    const moved = await this.repo.updateDeliveryFrom(deliveryId, from, { ...patch, status: to as DeliveriesTable['status'] });
    if (moved) {
      if (to === 'failed' && typeof patch.failed_internal === 'string') this.reported.reason(deliveryId, patch.failed_internal);
      this.record('delivery', moved, from, to, at, code, details);
      return moved;
    }
    const current = await this.repo.deliveryStatus(deliveryId);
    if (current !== undefined) this.notApplied('delivery', current, to, { deliveryId });
    return undefined;
  }

  /** Says why messages were not moved into `to`: refused by the table, or already there / moved on. */
  private async explainMessages(trackingIds: string[], to: MessageState): Promise<void> {
    for (const { tracking_id, state } of await this.repo.messageStates(trackingIds)) this.notApplied('message', state, to, { trackingId: tracking_id });
  }

  private notApplied(kind: TransitionKind, current: string, to: string, ids: Record<string, string>): void {
    if (current !== to && !transitionAllowed(kind, current, to)) this.refuse(kind, current, to, ids);
    // Otherwise a re-run or a race: the row is where the caller wanted it, or went on legitimately.
    else this.logger.debug({ kind, ...ids, current, to }, 'delivery ledger: transition not applied, the row is no longer in the expected state');
  }

  private refuse(kind: TransitionKind, from: string, to: string, ids: Record<string, string>): void {
    this.logger.warn({ kind, ...ids, from, to }, 'delivery ledger refused a transition its table does not allow');
  }

  private record(
    kind: TransitionKind,
    row: MessageIdentity & { id?: string; channel?: string },
    from: string,
    to: string,
    at: string,
    code: string | null,
    details: Record<string, unknown> | null,
  ): void {
    this.events.push({
      env_id: row.env_id,
      account_id: row.account_id,
      tracking_id: row.tracking_id,
      delivery_id: kind === 'delivery' ? (row.id ?? null) : null,
      channel: kind === 'delivery' ? (row.channel ?? null) : null,
      kind,
      from_state: from === NEW ? null : from,
      to_state: to,
      code,
      at,
      details: details ? JSON.stringify(details) : null,
    });
  }
}

/** What a retract takes back: a delivery not made yet (pending, or digested in a digest not sent yet), and an in-app notification (removed with it). */
function retractable(d: { channel: string; status: string }): boolean {
  return d.status === 'pending' || d.status === 'digested' || (d.status === 'delivered' && d.channel === 'inapp');
}

/** When a new delivery row reached `status`, by the column that records it. */
function timeOf(row: DeliveryRow, status: DeliveryStatus): string {
  const at = { pending: row.created_at, sent: row.sent_at, delivered: row.delivered_at, failed: row.failed_at }[status as string];
  return at ?? row.updated_at;
}

/** The transitions that create a delivery in `status`: through pending when it was sent or delivered at once. */
function creationPath(status: DeliveryStatus): [DeliveryStatus | typeof NEW, DeliveryStatus][] {
  return DELIVERY_TRANSITIONS[NEW].includes(status) ? [[NEW, status]] : [[NEW, 'pending'], ['pending', status]];
}

export type { DeliveryIdentity };

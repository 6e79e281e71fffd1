/**
 * The delivery ledger: the one writer of a message's life after acceptance (the message's state,
 * its deliveries, their attempts, the providers' reports) and of `delivery_events`.
 *
 * - Every state change is checked against transitions.ts and written as a conditional update
 *   (`WHERE state = <the state it changes from>`), so re-runs and races change nothing twice. A
 *   change the table does not allow (a provider's "failed" after "delivered") is refused: logged
 *   as a warning with the row's ids, never written, and no event.
 * - Every applied transition adds one `delivery_events` row in the same transaction. The rows of
 *   a transaction are buffered (LedgerSession) and written together just before it commits: one
 *   counter update per environment and one INSERT per transaction, not per message.
 * - Event ids come from a counter row per environment (`delivery_event_counters`), incremented
 *   in that last step. Its row lock is held only from there to the commit, and it makes ids
 *   increase in commit order within an environment: a consumer that reads "id > last seen" per
 *   environment never misses a row, which a sequence or autoincrement cannot promise (a smaller
 *   id may commit after a larger one has been read). On SQLite writers are serialized anyway.
 * - Not transitions, so no event: a retry (the delivery stays pending; the attempt is recorded),
 *   merged log fields (inbound SMS, replies, webhook outcomes), and acceptance, which the intake writes (its
 *   new -> queued | scheduled is in the table for when the intake records it).
 * - Retract (LedgerSession.retract): messages not processed yet, pending deliveries and in-app
 *   deliveries become retracted; the rest stays as it is.
 * - Reserved: held, digested (see transitions.ts); no transition reaches them yet.
 * - Retention: the hourly purge deletes events older than the log retention, like the messages.
 */
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock, Ids } from '../../clock.js';
import type { Dialect } from '../../storage/db.js';
import type { CoreTables } from '../../storage/schema.js';
import type { LogChannel } from '../sending/channels.js';
import type { DeliveryRow } from '../sending/sending.tables.js';
import { DeliveryOutcomes } from './delivery-outcomes.js';
import type { LedgerReport } from './ledger-report.js';
import { LedgerRepository } from './ledger.repository.js';
import type { EngagedDelivery } from './ledger.repository.js';
import { type DeliveryFailure, type Engagement, LedgerSession, type MessageFailure } from './ledger-session.js';

export { LedgerSession, successFields, type Engagement, type AttemptOutcome, type DeliveryFailure, type DeliverySuccess, type MessageFailure } from './ledger-session.js';

export interface LedgerDeps {
  db: Kysely<CoreTables>;
  dialect: Dialect;
  clock: Clock;
  ids: Ids;
  logger: Logger;
}

/** A provider's report about a message it accepted (telephony status callbacks). */
export interface ProviderStatus {
  channel: LogChannel;
  /** The id the provider gave when it accepted the message (Twilio SID, ...). */
  providerMessageId: string;
  status: 'delivered' | 'failed';
  at?: Date;
  /** Readable failure code, e.g. UNDELIVERED, BUSY, NO_ANSWER (recorded as <channel>_failed_code). */
  code?: string;
  internal?: string;
  /** Channel log fields to merge, e.g. {call_delivered_code: 'COMPLETED', call_delivered_cost: 0.013}. */
  extra?: Record<string, unknown>;
}

export class DeliveryLedger {
  /** What the committed transactions did: warning lines for retries and failures, tallies for /metrics. */
  readonly outcomes: DeliveryOutcomes;

  constructor(private readonly deps: LedgerDeps) {
    this.outcomes = new DeliveryOutcomes(deps.logger);
  }

  /**
   * Runs `work` in a new transaction; the events it recorded are written just before the commit,
   * and once it committed, what it did is reported to `outcomes`.
   */
  async transaction<T>(work: (tx: LedgerSession) => Promise<T>): Promise<T> {
    let report: LedgerReport | undefined;
    const result = await this.deps.db.transaction().execute(async (trx) => {
      const tx = this.session(trx);
      const out = await work(tx);
      await tx.flush();
      report = tx.report();
      return out;
    });
    if (report) {
      // Committed: whatever goes wrong in reporting it must not look like a failed transaction.
      try {
        this.outcomes.committed(report);
      } catch (err) {
        this.deps.logger.error({ err }, 'reporting a committed delivery ledger transaction failed');
      }
    }
    return result;
  }

  /** The ledger inside a transaction the caller runs; the caller must call flush() last, before commit. */
  session(trx: Kysely<CoreTables>): LedgerSession {
    return new LedgerSession(trx, this.deps.dialect, this.deps.logger);
  }

  /** Fails, with a code and the reason, those of these messages still queued or scheduled. */
  failMessages(trackingIds: string[], failure: MessageFailure): Promise<string[]> {
    return this.transaction((tx) => tx.failMessages(trackingIds, failure));
  }

  /** Fails a delivery still pending, without an attempt (its job was given up). */
  failDelivery(deliveryId: string, failure: DeliveryFailure): Promise<boolean> {
    return this.transaction((tx) => tx.deliveryFailed(deliveryId, null, failure));
  }

  /**
   * Records a provider's report and applies it to its delivery. A report that arrives before
   * the delivery committed the provider id waits, and applyProviderReports applies it once it
   * has: the report is committed first, on its own, so whichever of the two commits last sees
   * the other. Returns the delivery when the report was applied now.
   */
  async recordProviderStatus(event: ProviderStatus): Promise<DeliveryRow | null> {
    await new LedgerRepository(this.deps.db, this.deps.dialect).insertProviderEvent({
      id: this.deps.ids.uuid(),
      channel: event.channel,
      provider_message_id: event.providerMessageId,
      status: event.status,
      at: (event.at ?? this.deps.clock.now()).toISOString(),
      code: event.code ?? null,
      internal: event.internal ?? null,
      extra: event.extra ? JSON.stringify(event.extra) : null,
      applied_at: null,
    });
    return this.applyProviderReports(event.channel, event.providerMessageId);
  }

  /** Applies waiting reports for one provider message id; called after a delivery records that id. */
  applyProviderReports(channel: string, providerMessageId: string): Promise<DeliveryRow | null> {
    return this.transaction((tx) => tx.applyProviderReports(channel, providerMessageId, this.deps.clock.now().toISOString()));
  }

  /** Merges log fields into a delivery's `extra` (inbound SMS, auto-replies); no transition. */
  mergeDeliveryDetails(deliveryId: string, fields: Record<string, unknown>, at: string): Promise<boolean> {
    return this.transaction((tx) => tx.mergeDeliveryDetails(deliveryId, fields, at));
  }

  /**
   * Records an open or a click of a sent email (LedgerSession.recordEngagement) and, when there
   * was one, runs `alongside` in the same transaction (the webhook outbox's event), so the log
   * field and its event commit together. Undefined: no sent email delivery `deliveryId` in `envId`.
   */
  recordEngagement(
    deliveryId: string,
    envId: string,
    engagement: Engagement,
    alongside: (trx: Kysely<CoreTables>, delivery: EngagedDelivery) => Promise<unknown>,
  ): Promise<EngagedDelivery | undefined> {
    return this.transaction(async (tx) => {
      const delivery = await tx.recordEngagement(deliveryId, envId, engagement);
      if (delivery) await alongside(tx.db, delivery);
      return delivery;
    });
  }

  /** A delivery with its message's user and notification type, or undefined (never made, or purged). */
  findEngagedDelivery(deliveryId: string): Promise<EngagedDelivery | undefined> {
    return new LedgerRepository(this.deps.db, this.deps.dialect).engagedDelivery(deliveryId);
  }

  /**
   * Deletes what was received before `before`: messages with their deliveries and attempts,
   * delivery events and provider reports. In batches, so no purge holds a long transaction.
   */
  async purgeBefore(before: string): Promise<void> {
    const repo = new LedgerRepository(this.deps.db, this.deps.dialect);
    while ((await repo.purgeMessagesBefore(before)) > 0) {
      // next batch
    }
    while ((await repo.purgeEventsBefore(before)) > 0) {
      // next batch
    }
    await repo.purgeProviderEventsBefore(before);
  }

  /**
   * Deletes the messages of one type of one environment received before `before` (the type's
   * `retention`), with their deliveries and attempts, in batches. Their delivery events and
   * provider reports hold no content and go with the server-wide purge.
   */
  async purgeTypeBefore(envId: string, notificationId: string, before: string): Promise<number> {
    const repo = new LedgerRepository(this.deps.db, this.deps.dialect);
    let total = 0;
    for (let n = await repo.purgeTypeMessagesBefore(envId, notificationId, before); n > 0; n = await repo.purgeTypeMessagesBefore(envId, notificationId, before)) total += n;
    return total;
  }
}

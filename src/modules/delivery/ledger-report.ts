import type { AttemptRow } from '../sending/sending.tables.js';
import type { DeliveryEventsTable } from './delivery.tables.js';
import type { DeliveryIdentity } from './ledger.repository.js';

/** A provider call (or local delivery) whose attempt was written with the change of its delivery. */
export interface ReportedAttempt {
  delivery: DeliveryIdentity;
  attempt: AttemptRow;
  /** A retry: when its next attempt is due. */
  retryAt?: string;
}

/**
 * What one committed ledger transaction did, for what watches deliveries (DeliveryOutcomes: the
 * warning lines and the metrics). Retries are not transitions, so they come as attempts only.
 */
export interface LedgerReport {
  events: readonly DeliveryEventsTable[];
  attempts: readonly ReportedAttempt[];
  /** Why a delivery (by its id) or a message (by its trackingId) failed, for the failures among `events`. */
  reasons: ReadonlyMap<string, string>;
}

/** A point to roll a session's buffers back to, with a savepoint (LedgerSession.checkpoint). */
export interface LedgerMark {
  events: number;
  attempts: number;
}

/**
 * The report of a session being written: attempts in the order they were recorded, rolled back
 * with their savepoints like the events; failure reasons by id (a stale one is never read: it is
 * looked up only for an event that was written).
 */
export class ReportBuffer {
  private readonly attempts: ReportedAttempt[] = [];
  private readonly reasons = new Map<string, string>();

  attempt(delivery: DeliveryIdentity, attempt: AttemptRow, retryAt?: string): void {
    this.attempts.push(retryAt ? { delivery, attempt, retryAt } : { delivery, attempt });
  }

  reason(id: string, reason: string | null | undefined): void {
    if (reason) this.reasons.set(id, reason);
  }

  get attemptCount(): number {
    return this.attempts.length;
  }

  rollbackTo(attempts: number): void {
    this.attempts.length = Math.min(attempts, this.attempts.length);
  }

  report(events: readonly DeliveryEventsTable[]): LedgerReport {
    return { events, attempts: this.attempts, reasons: this.reasons };
  }
}

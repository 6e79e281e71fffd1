import type { JobContext } from '../../queue/port.js';
import type { AttemptRow, DeliveryRow } from './sending.tables.js';

/**
 * Runs that may have made a provider call without recording it: a worker killed (kill -9, out of
 * memory, a container killed in a deploy) while the call was under way records no attempt row, so
 * the delivery's recorded attempts cannot tell its next run that a call may have gone out. What
 * tells it is the run count of the job, which the queue keeps without a write of ours:
 *
 * - a delivery.run job (DeliveryJobData): every counted run either records its call (a retry:
 *   RetryJobError runs the same job again), finds its delivery settled (the job ends), or ends
 *   without recording one, by dying (its lock expires; the next claim counts a run) or because
 *   the record failed (its error retries the job). So at run k the delivery has
 *   `priorAttempts + k - 1` attempts unless a run before left a call unrecorded. The queue counts
 *   no deferral and no release at a stop, and neither runs a call (a stop parks calls not begun);
 *   a run that failed before its calls (the batch's reads) is the one false positive.
 * - a routing job's re-run (HandedDelivery.resumed): a delivery whose message an earlier run
 *   processed and that still has no attempt. That run made its first attempt and died before
 *   recording it, or its record failed; or it died between its commit and the call (a false
 *   positive). A deferred routing run processed none of the messages it deferred.
 *
 * Such a run is reported through DeliverInput.earlierAttempts() as an attempt that is not stored
 * (unrecordedRunAttempt); an executor whose provider takes no idempotency key looks, before
 * calling again, for what that run may have made.
 */

/** provider_code of the attempt earlierAttempts() adds for a run that may have made a call it did not record. */
export const UNRECORDED_RUN = 'UNRECORDED_RUN';

/** The data of a delivery.run job. */
export interface DeliveryJobData {
  deliveryId: string;
  /**
   * The attempts the delivery has recorded when the job first runs if every call before that run
   * was recorded: the retry that enqueued it, or, for a hand-over, the first attempt then under
   * way. Absent from jobs enqueued before it existed.
   */
  priorAttempts?: number;
}

/** A run of this delivery.run job finds `recorded` attempts: true when an earlier run of it may have left a call unrecorded. */
export function deliveryJobMissesAttempts(recorded: number, job: Pick<JobContext, 'attempt'>, priorAttempts: number | undefined): boolean {
  // A job enqueued before it carried priorAttempts: any re-run, or a delivery without an attempt
  // (a hand-over whose process died), may follow a run that died. A list request too many at worst.
  if (priorAttempts === undefined) return recorded === 0 || job.attempt > 1;
  return recorded < priorAttempts + job.attempt - 1;
}

/**
 * The attempt a run that may have left its call unrecorded is reported as (not a stored row): an
 * unknown outcome ('retry', UNRECORDED_RUN), started no later than that run did, at the start of
 * the delivery's last recorded attempt (a run after it started after it) or, with none, at the
 * delivery's creation (the routing commit that came before any call).
 */
export function unrecordedRunAttempt(delivery: DeliveryRow, recorded: AttemptRow[]): AttemptRow {
  const last = recorded.at(-1);
  return {
    id: '',
    delivery_id: delivery.id,
    attempt: (last?.attempt ?? delivery.attempts) + 1,
    started_at: last?.started_at ?? delivery.created_at,
    duration_ms: 0,
    outcome: 'retry',
    provider_code: UNRECORDED_RUN,
    detail: 'a run of this delivery may have made this call without recording it (its worker died, or its record failed)',
  };
}

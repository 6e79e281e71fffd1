import type { Deps } from '../../deps.js';
import { DeliveryError } from '../../channels/types.js';
import { type GraceTimer, realGraceTimer } from '../../queue/runner.js';
import { type JobContext, type JobToEnqueue, type Queue, RetryJobError } from '../../queue/port.js';
import type { AttemptOutcome } from '../delivery/ledger.js';
import type { UsersService } from '../users/users.service.js';
import { SEND_CHANNELS, type SendChannel } from './channels.js';
import type { BatchScope, DeliverOutcome, Executors } from './executors/types.js';
import { MessagesRepository } from './messages.repository.js';
import { retryDelayAfter } from './retry-schedule.js';
import type { SendBody } from './sending.schemas.js';
import type { AttemptRow, DeliveryRow, MessageRow } from './sending.tables.js';
import { type DeliveryJobData, deliveryJobMissesAttempts, unrecordedRunAttempt } from './unrecorded-runs.js';

/** Channels whose providers send status reports after accepting (telephony callbacks). */
const ASYNC_REPORTS = new Set(['sms', 'call']);
/** Provider calls per delivery before a transient failure becomes final. */
export const MAX_DELIVERY_ATTEMPTS = 6;
/** The job of a delivery's retries (and of any delivery handed to the queue instead of made at once). */
export const DELIVER_JOB = 'delivery.run';
/** Deliveries whose calls are recorded together (one ledger transaction), as a claimed batch of jobs is. */
export const DELIVERY_BATCH = 16;
/**
 * First attempts made and recorded together (one batch scope, one ledger transaction) by a
 * routing run. A run's first attempts all go out at once whatever this is (the provider's pool
 * bounds the wire), so it bounds only how many wait for one another's record. Measured reason
 * (issue 11, bench email, worker process): a run of about 80 mails in batches of 16 recorded them
 * in 5 or 6 transactions, each a commit and five statements, and read the batch's provider,
 * tracking and sender settings each time.
 */
export const FIRST_ATTEMPT_BATCH = 64;
/**
 * How long a routing job waits for its first attempts before it hands the ones still under way
 * to delivery.run jobs and completes. A provider that hangs (timeouts of 15 to 60 s) would
 * otherwise hold one of the few routing slots, and every later send behind it, in-app included.
 */
export const FIRST_ATTEMPT_BUDGET_MS = 5_000;
/**
 * When a handed-over delivery's job runs if its attempt is never recorded (the process died while
 * the call was under way): longer than any provider's own timeouts, so that another process does
 * not make the attempt again while this one is still making it.
 */
export const HANDOVER_DELAY_MS = 5 * 60_000;
/**
 * How long a graceful stop waits for the provider calls under way (handed-over first attempts
 * included) to end and be recorded, counted from the stop's start: the queue's default stop grace,
 * so that both end together, within docker stop's 10 s. A call still unanswered then stays
 * unrecorded: its delivery's job (the stand-by job of a handed-over one, HANDOVER_DELAY_MS after
 * the hand-over) makes it again, as after a crash.
 */
export const STOP_GRACE_MS = 10_000;

/** Waits out the stop grace: the queue's GraceTimer (tests end it by hand). */
export type StopGraceTimer = GraceTimer;

/** How a stop waits for the provider calls under way (DeliveryRuns.stop). */
export interface CallsStopOptions {
  /** See STOP_GRACE_MS. */
  stopGraceMs?: number;
  /** Waits out stopGraceMs. Default: a real timer. */
  stopGraceTimer?: StopGraceTimer;
}

/** Timing of a DeliveryRuns. */
export interface DeliveryTiming {
  /** Base of the waits between provider attempts (retry-schedule.ts; DELIVERY_RETRY_BASE_MS by default). */
  retryBaseMs: number;
  /** See FIRST_ATTEMPT_BUDGET_MS; 0 waits for every first attempt however long it takes. */
  firstAttemptBudgetMs?: number;
}

/** One claimed `delivery.run` job. */
export interface DeliveryJob {
  data: DeliveryJobData;
  job: JobContext;
}

/** A pending delivery its caller holds already, with its message: its first attempt needs no read. */
export interface HandedDelivery {
  delivery: DeliveryRow;
  message: MessageRow;
  /**
   * Its message was processed by an earlier run of the routing job, which may have made this
   * first attempt and died before recording it (unrecorded-runs.ts): reported to the executor.
   */
  resumed?: boolean;
}

/** A provider call of this batch and how it ended. */
interface Call {
  index: number;
  delivery: DeliveryRow;
  message: MessageRow;
  channel: SendChannel;
  record: AttemptOutcome;
  outcome?: DeliverOutcome;
  failure?: DeliveryError;
  /** A retry: how long until the next attempt (the provider's Retry-After, else the backoff). */
  retryDelayMs?: number;
}

/**
 * Makes provider calls a batch at a time: the first attempts of deliveries the routing job just
 * committed (runFirst, with the rows it holds), and `delivery.run` jobs (run: one read of the
 * batch's deliveries and one of their messages). The provider calls go out all at once (a
 * provider's pool bounds what is really on the wire), then every attempt and transition of the
 * batch is recorded in one ledger transaction. Per delivery the outcome is what a job of its own
 * would have had: a retryable failure retries that delivery alone with its own backoff, a
 * permanent one fails that delivery alone.
 *
 * Crash safety: nothing is recorded until the calls are made, so a worker killed mid-batch leaves
 * its deliveries pending; a first attempt is redone by the re-run of the routing job (which
 * completes only once its first attempts are recorded or handed over to stand-by jobs, which
 * then redo it), a retry by its job, after the lock
 * expires, with the same Message-ID (the id is the delivery's). What may arrive twice is what was
 * in flight or not yet committed at the kill: at most the batches being run. Such a redo is told
 * to its executor (earlierAttempts(), see unrecorded-runs.ts), so that one whose provider takes
 * no idempotency key (Twilio) looks for what the dead run made before calling again.
 */
export class DeliveryRuns {
  /** Reads of deliveries, messages and attempts outside a transaction (the calls' own reads). */
  private readonly messages: MessagesRepository;

  constructor(
    private readonly deps: Deps,
    private readonly executors: Executors,
    private readonly users: UsersService,
    private readonly timing: DeliveryTiming,
    /** Where a first attempt's retry (or its hand-over) is enqueued. */
    private readonly queue: Pick<Queue, 'enqueueMany' | 'reschedule' | 'cancel'> = deps.queue,
  ) {
    this.messages = new MessagesRepository(deps.db);
  }

  /** How long a routing job waits for the first attempts it hands here (0: as long as they take). */
  get firstAttemptBudgetMs(): number {
    return this.timing.firstAttemptBudgetMs ?? 0;
  }

  /** First attempts under way in this process, by delivery id: what each will answer (see runFirst). */
  private readonly firstAttempts = new Map<string, Promise<unknown>>();
  /** Batches whose provider calls are under way, each settling once they are recorded (what stop() waits for). */
  private readonly underWay = new Set<Promise<unknown>>();
  /** Set by stop(): no provider call is started any more. */
  private stopped: Promise<void> | null = null;

  /**
   * Graceful stop: starts no provider call any more, and waits up to `stopGraceMs` (STOP_GRACE_MS)
   * for the calls under way, handed-over first attempts included, to end and be recorded through
   * the ledger; the caller closes the executors and storage after. Not for ever: a provider that
   * hangs past the bound leaves its call unrecorded, and its delivery to its job (a handed-over
   * one to its stand-by job) as after a crash. Idempotent.
   */
  stop(options: CallsStopOptions = {}): Promise<void> {
    this.stopped ??= this.waitForCalls(options.stopGraceMs ?? STOP_GRACE_MS, options.stopGraceTimer ?? realGraceTimer);
    return this.stopped;
  }

  private async waitForCalls(graceMs: number, timer: StopGraceTimer): Promise<void> {
    // Only what is under way now: no call starts after this (see parked).
    const calls = [...this.underWay];
    if (calls.length === 0) return;
    const over = new AbortController();
    let ended = false;
    const all = Promise.allSettled(calls).then(() => {
      ended = true;
    });
    await Promise.race([all, timer(graceMs, over.signal)]);
    over.abort();
    if (!ended) {
      this.deps.logger.warn(
        { batches: [...this.underWay].length, graceMs },
        'provider calls still under way at the end of the stop grace; left unrecorded, their delivery jobs (stand-by jobs for handed-over first attempts) make them again',
      );
    }
  }

  /**
   * What a run that would start provider calls after stop() answers: never. Its job is released
   * by the queue's stop (it runs again elsewhere or after the restart, the delivery untouched)
   * and the process exits under it; answering would count a job attempt, or fail a message on its
   * job's last one, for a call never made.
   */
  private parked<T>(): Promise<T> {
    this.deps.logger.info('provider calls not started: stopping');
    return new Promise<T>(() => {});
  }

  /** Keeps `batch` (provider calls and their recording) among the calls a stop waits for until it settles. */
  private track<T>(batch: Promise<T>): Promise<T> {
    this.underWay.add(batch);
    const done = () => {
      this.underWay.delete(batch);
    };
    batch.then(done, done);
    return batch;
  }

  /** Handles a batch of jobs; returns, per job in order, undefined (done) or the error it ends with. */
  async run(items: DeliveryJob[]): Promise<unknown[]> {
    const results: unknown[] = items.map(() => undefined);
    // A handed-over delivery whose first attempt this process is still making: its outcome first
    // (recorded, or a retry this job then makes), never a second call alongside it.
    const inFlight = items.map((i) => this.firstAttempts.get(i.data.deliveryId)).filter((p) => p !== undefined);
    if (inFlight.length > 0) await Promise.all(inFlight);
    return (await this.callProviders(items, (calls) => this.recordRun(calls, results))) ?? results;
  }

  /** run(), once its calls are made: records them and what follows; per job undefined or its error. */
  private async recordRun(calls: Call[], results: unknown[]): Promise<unknown[]> {
    if (calls.length === 0) return results;

    const unrecorded = await this.record(calls, false);
    for (const [index, err] of unrecorded) results[index] = err;
    const recorded = calls.filter((c) => !unrecorded.has(c.index));

    for (const call of recorded) {
      if (call.record.kind === 'retry') results[call.index] = new RetryJobError(call.failure!.message, call.retryDelayMs);
    }
    for (const [index, err] of await this.afterRecorded(recorded)) results[index] ??= err;
    return results;
  }

  /**
   * First attempts of deliveries the caller wrote pending (attempts 0) and committed, made with
   * the rows it holds: no delivery job, no read. Recorded as run() records a batch; a retry gets
   * its delivery.run job (due after the backoff) in the transaction that records the attempt, so
   * a delivery that is pending after an attempt always has a job. Measured reason: a job per
   * delivery was three queue row writes (insert, claim, completion), a claim statement and two
   * reads per batch, about a third of the email worker's SQL per mail. Returns, per delivery in
   * order, undefined or the error that left its attempt unrecorded or its follow-up undone: the
   * caller's job then runs again, and its re-run makes the attempts still missing (attempts 0).
   *
   * `deadline` (the routing job's time budget): calls still under way when it passes are handed
   * over (handOver) and answer undefined at once; they go on in the background and are recorded
   * when they end.
   */
  async runFirst(handed: HandedDelivery[], deadline?: Promise<void>): Promise<unknown[]> {
    // On the tick the calls start (no await before attemptFirst): after stop(), none does.
    if (this.stopped) return this.parked();
    const results: unknown[] = handed.map(() => undefined);
    // A delivery whose first attempt this process is making already (the routing job's lock
    // expired while its mails went out, and its re-run came here): that attempt's result, not a second call.
    const joined: Promise<void>[] = [];
    const own: HandedDelivery[] = [];
    const ownIndex: number[] = [];
    for (const [index, h] of handed.entries()) {
      const running = this.firstAttempts.get(h.delivery.id);
      if (running) {
        joined.push(
          running.then((result) => {
            results[index] = result;
          }),
        );
      } else {
        own.push(h);
        ownIndex.push(index);
      }
    }
    const { answered, recorded } = this.attemptFirst(own, deadline);
    // Settles once the attempt is recorded (or its recording failed): a joiner, or a delivery.run
    // job of a handed-over delivery, waits for that, never for the hand-over alone.
    const settled = recorded.then(
      (r) => r,
      (err: unknown) => own.map(() => err),
    );
    own.forEach((h, k) => this.firstAttempts.set(h.delivery.id, settled.then((r) => r[k])));
    void settled.finally(() => {
      for (const h of own) this.firstAttempts.delete(h.delivery.id);
    });
    for (const [k, result] of (await answered).entries()) results[ownIndex[k]] = result;
    await Promise.all(joined);
    return results;
  }

  /**
   * runFirst for deliveries no other run of this process is attempting. `recorded` settles once
   * the calls are recorded; `answered` then too, or at the deadline once the calls still under
   * way are handed over (undefined each, or the error of the hand-over).
   */
  private attemptFirst(handed: HandedDelivery[], deadline?: Promise<void>): { answered: Promise<unknown[]>; recorded: Promise<unknown[]> } {
    const scope = batchScope();
    const calls: Promise<Call>[] = [];
    const called: DeliveryRow[] = [];
    for (const [index, { delivery, message }] of handed.entries()) {
      const channel = channelOf(delivery.channel);
      const executor = this.executors[channel];
      if (delivery.status === 'pending' && executor) {
        calls.push(this.call(index, delivery, message, channel, handed[index].resumed === true, (input) => executor.deliver(input, scope)));
        called.push(delivery);
      }
    }
    const made = Promise.all(calls);
    if (!deadline || calls.length === 0) {
      const recorded = this.track(made.then((m) => this.recordFirst(handed.length, m)));
      return { answered: recorded, recorded };
    }
    // Decided once, on this event loop: either every call ended within the budget and the batch
    // is recorded as usual, or the calls are handed over before anything of them is recorded.
    let phase: 'calling' | 'recording' | 'handed over' = 'calling';
    let handover: Promise<Map<string, string>> = Promise.resolve(new Map<string, string>());
    const late = deadline.then(() => {
      if (phase !== 'calling') return;
      phase = 'handed over';
      handover = this.handOver(called);
    });
    const recorded = made.then(async (m) => {
      if (phase === 'calling') phase = 'recording';
      // A hand-over that failed leaves the routing job to run again: recorded as if there had been none.
      const jobs = await handover.catch(() => new Map<string, string>());
      return this.recordFirst(handed.length, m, jobs);
    });
    // Handed over or not, stop() waits for these calls' record (up to its grace).
    void this.track(recorded);
    const answered = Promise.race([recorded, late]).then(async () => {
      if (phase !== 'handed over') return recorded;
      // Nobody waits for these results any more: what went wrong is logged (the stand-by jobs redo it).
      void recorded.then(
        (results) => {
          const left = results.filter((r) => r !== undefined);
          if (left.length > 0) this.deps.logger.warn({ err: left[0], deliveries: left.length }, 'handed-over first attempts could not all be recorded; their delivery.run jobs make them again');
        },
        (err: unknown) => this.deps.logger.warn({ err }, 'handed-over first attempts could not be recorded; their delivery.run jobs make them again'),
      );
      const results: unknown[] = handed.map(() => undefined);
      try {
        await handover;
      } catch (err) {
        for (const c of called) results[handed.findIndex((h) => h.delivery === c)] = err;
      }
      return results;
    });
    return { answered, recorded };
  }

  /** Records a batch of first attempts and what follows them; per delivery undefined or the error left. */
  private async recordFirst(count: number, made: Call[], handedOver = new Map<string, string>()): Promise<unknown[]> {
    const results: unknown[] = Array.from({ length: count }, () => undefined);
    if (made.length === 0) return results;
    const unrecorded = await this.record(made, true, handedOver);
    for (const [index, err] of unrecorded) results[index] = err;
    const recorded = made.filter((c) => !unrecorded.has(c.index));
    for (const [index, err] of await this.afterRecorded(recorded)) results[index] ??= err;
    return results;
  }

  /**
   * Gives first attempts still under way past the routing job's budget each a delivery.run job,
   * due HANDOVER_DELAY_MS from now, so that the routing job can complete and nothing is lost if
   * this process dies before they are recorded. The attempt's recording then moves that job to
   * its retry time, or cancels it. Returns the jobs by delivery id.
   */
  private async handOver(deliveries: DeliveryRow[]): Promise<Map<string, string>> {
    const runAt = new Date(this.deps.clock.now().getTime() + HANDOVER_DELAY_MS);
    // Its first run expects the attempt under way now recorded (unrecorded-runs.ts).
    const jobs = deliveries.map((d) => ({ name: DELIVER_JOB, data: { deliveryId: d.id, priorAttempts: d.attempts + 1 } satisfies DeliveryJobData, options: { runAt, maxAttempts: MAX_DELIVERY_ATTEMPTS + 2 } }));
    const ids = await this.deps.ledger.transaction((tx) => this.queue.enqueueMany(tx.db, jobs));
    this.deps.logger.warn(
      { deliveries: deliveries.length, channels: [...new Set(deliveries.map((d) => d.channel))], budgetMs: this.timing.firstAttemptBudgetMs },
      'first attempts still under way after the routing budget; their routing job completes, delivery.run jobs stand by until they are recorded',
    );
    return new Map(deliveries.map((d, i) => [d.id, ids[i]]));
  }

  /**
   * Reads the batch's pending deliveries and calls their providers, all at once; answers what
   * `then` makes of the calls, or null when there was nothing to call. The calls and `then`
   * are one batch under way for stop(), from the moment the calls start.
   */
  private async callProviders(items: DeliveryJob[], then: (calls: Call[]) => Promise<unknown[]>): Promise<unknown[] | null> {
    const repo = this.messages;
    const deliveries = new Map((await repo.findDeliveries(items.map((i) => i.data.deliveryId))).map((d) => [d.id, d]));
    const pending = [...deliveries.values()].filter((d) => d.status === 'pending');
    if (pending.length === 0) return null;
    const messages = new Map((await repo.findMessagesForWork([...new Set(pending.map((d) => d.tracking_id))])).map((m) => [m.tracking_id, m]));
    // Checked on the tick the calls start: a stop that began during the reads leaves them unmade.
    if (this.stopped) return this.parked();
    const scope = batchScope();
    const seen = new Set<string>();
    const calls: Promise<Call | null>[] = items.map(async ({ data, job }, index) => {
      const delivery = deliveries.get(data.deliveryId);
      const message = delivery && messages.get(delivery.tracking_id);
      // Gone, or settled by an earlier run of this job (a re-run after a crash): nothing to do.
      if (!delivery || delivery.status !== 'pending' || !message || seen.has(delivery.id)) return null;
      seen.add(delivery.id);
      const channel = channelOf(delivery.channel);
      const executor = this.executors[channel];
      if (!executor) return null;
      const unrecorded = deliveryJobMissesAttempts(delivery.attempts, job, data.priorAttempts);
      return this.call(index, delivery, message, channel, unrecorded, (input) => executor.deliver(input, scope));
    });
    return this.track(Promise.all(calls).then((made) => then(made.filter((c): c is Call => c !== null))));
  }

  /**
   * One provider call, and the attempt and transition it makes. `unrecorded`: an earlier run may
   * have made this call without recording it (unrecorded-runs.ts), which earlierAttempts() reports.
   */
  private async call(
    index: number,
    delivery: DeliveryRow,
    message: MessageRow,
    channel: SendChannel,
    unrecorded: boolean,
    deliver: (input: Parameters<NonNullable<Executors[SendChannel]>['deliver']>[0]) => Promise<DeliverOutcome>,
  ): Promise<Call> {
    const attempt = delivery.attempts + 1;
    const started = this.deps.clock.now();
    try {
      const earlierAttempts = async (): Promise<AttemptRow[]> => {
        const recorded = delivery.attempts === 0 ? [] : await this.messages.attemptsOfDelivery(delivery.id);
        return unrecorded ? [...recorded, unrecordedRunAttempt(delivery, recorded)] : recorded;
      };
      const outcome = await deliver({ delivery, message, content: JSON.parse(delivery.content ?? '{}') as Record<string, unknown>, body: JSON.parse(message.request) as SendBody, earlierAttempts });
      const at = this.deps.clock.now();
      const row = attemptRow(this.deps.ids.uuid(), delivery.id, attempt, started, at, 'success', null, outcome.result.response ?? null);
      const success = { delivered: outcome.delivered, at: at.toISOString(), providerMessageId: outcome.result.providerMessageId ?? null, extra: outcome.extra ?? null };
      return { index, delivery, message, channel, outcome, record: { kind: 'sent', deliveryId: delivery.id, attempt: row, success } };
    } catch (err) {
      const failure = err instanceof DeliveryError ? err : new DeliveryError('INTERNAL', errorText(err), { retryable: true });
      const at = this.deps.clock.now();
      const retry = failure.retryable && attempt < MAX_DELIVERY_ATTEMPTS;
      const row = attemptRow(this.deps.ids.uuid(), delivery.id, attempt, started, at, retry ? 'retry' : 'failed', failure.options.providerCode ?? failure.code, failure.message);
      const iso = at.toISOString();
      if (retry) {
        // Decided now, so that the ledger's warning line can say when the next attempt is due.
        const retryDelayMs = retryDelayAfter(attempt, failure.options.retryAfterMs, this.timing.retryBaseMs);
        const retryAt = new Date(at.getTime() + retryDelayMs).toISOString();
        return { index, delivery, message, channel, failure, retryDelayMs, record: { kind: 'retry', deliveryId: delivery.id, attempt: row, at: iso, retryAt } };
      }
      const record: AttemptOutcome = { kind: 'failed', deliveryId: delivery.id, attempt: row, failure: { at: iso, code: failure.code, reason: failure.message, extra: failureFields(delivery.channel, failure) } };
      return { index, delivery, message, channel, failure, record };
    }
  }

  /**
   * Records every call of the batch in one ledger transaction, with `retryJobs` the delivery.run
   * jobs of the retries it recorded. Should that fail, each call is recorded in a transaction of
   * its own, so one row that cannot be written does not send the others again; returns the
   * calls that could not be recorded (their jobs run again).
   */
  private async record(calls: Call[], retryJobs: boolean, handedOver = new Map<string, string>()): Promise<Map<number, unknown>> {
    const write = (batch: Call[]) =>
      this.deps.ledger.transaction(async (tx) => {
        const changed = await tx.recordAttempts(batch.map((c) => c.record));
        const retries = retryJobs ? batch.filter((c, i) => changed[i] && c.record.kind === 'retry') : [];
        const jobs = retries.filter((c) => !handedOver.has(c.delivery.id)).map((c) => this.retryJob(c));
        if (jobs.length > 0) await this.queue.enqueueMany(tx.db, jobs);
        // A handed-over delivery has its job: moved to the retry's time, or cancelled once settled.
        // Either finds the job started already only when it outran HANDOVER_DELAY_MS; it then reads the delivery as recorded here.
        for (const c of batch) {
          const jobId = handedOver.get(c.delivery.id);
          if (jobId === undefined) continue;
          if (retries.includes(c)) await this.queue.reschedule(tx.db, jobId, this.retryAt(c));
          else await this.queue.cancel(tx.db, jobId);
        }
      });
    const unrecorded = new Map<number, unknown>();
    try {
      await write(calls);
      return unrecorded;
    } catch (err) {
      this.deps.logger.warn({ err, deliveries: calls.length }, 'recording a batch of deliveries failed; recording them one by one');
    }
    for (const call of calls) {
      try {
        await write([call]);
      } catch (err) {
        unrecorded.set(call.index, err);
      }
    }
    return unrecorded;
  }

  /** The job of a first attempt's retry, due when the backoff (or the provider's Retry-After) says. */
  private retryJob(call: Call): JobToEnqueue {
    // Its first run expects this attempt recorded (unrecorded-runs.ts).
    return { name: DELIVER_JOB, data: { deliveryId: call.delivery.id, priorAttempts: call.record.attempt.attempt } satisfies DeliveryJobData, options: { runAt: this.retryAt(call), maxAttempts: MAX_DELIVERY_ATTEMPTS + 2 } };
  }

  private retryAt(call: Call): Date {
    return new Date(this.deps.clock.now().getTime() + (call.retryDelayMs ?? 0));
  }

  /**
   * What follows a recorded call: provider reports that came in before the provider id was
   * committed, and the bounce suppression of an address the server refused for good. Returns
   * the jobs whose step failed (they run again and find their delivery settled).
   */
  private async afterRecorded(calls: Call[]): Promise<Map<number, unknown>> {
    const failed = new Map<number, unknown>();
    const reported = calls.filter((c) => c.record.kind === 'sent' && c.outcome?.result.providerMessageId && ASYNC_REPORTS.has(c.delivery.channel));
    if (reported.length > 0) {
      const now = this.deps.clock.now().toISOString();
      try {
        await this.deps.ledger.transaction(async (tx) => {
          for (const c of reported) await tx.applyProviderReports(c.delivery.channel, c.outcome!.result.providerMessageId!, now);
        });
      } catch (err) {
        for (const c of reported) failed.set(c.index, err);
      }
    }
    for (const c of calls) {
      const failure = c.failure;
      if (c.record.kind !== 'failed' || !failure?.options.recipientInvalid || c.channel !== 'EMAIL') continue;
      const { message } = c;
      try {
        await this.users.setSuppression(message.account_id, message.env_id, message.user_id, 'EMAIL', {
          reason: 'Bounce',
          details: { recipient: failure.options.recipient ?? message.user_email, diagnosticCode: failure.options.providerCode ?? failure.code, trackingId: message.tracking_id, at: c.record.failure.at },
        });
      } catch (err) {
        failed.set(c.index, err);
      }
    }
    return failed;
  }
}

/** Memoises lookups shared by the calls of one batch (an environment's email provider, say). */
function batchScope(): BatchScope {
  const loads = new Map<string, Promise<unknown>>();
  return {
    once<T>(key: string, load: () => Promise<T>): Promise<T> {
      let loaded = loads.get(key) as Promise<T> | undefined;
      if (!loaded) {
        loaded = load();
        loads.set(key, loaded);
      }
      return loaded;
    },
  };
}

const channelOf = (log: string) => SEND_CHANNELS.find((c) => c.log === log)!.channel;

function attemptRow(id: string, deliveryId: string, attempt: number, started: Date, at: Date, outcome: AttemptRow['outcome'], providerCode: string | null, detail: string | null): AttemptRow {
  return {
    id,
    delivery_id: deliveryId,
    attempt,
    started_at: started.toISOString(),
    duration_ms: Math.max(0, at.getTime() - started.getTime()),
    outcome,
    provider_code: providerCode,
    detail: detail?.slice(0, 1000) ?? null,
  };
}

function failureFields(channel: string, failure: DeliveryError): Record<string, unknown> {
  const { recipient, providerCode } = failure.options;
  switch (channel) {
    case 'email':
      return { ...(recipient ? { email_failed_recipient: recipient } : {}), ...(providerCode ? { email_failed_diagnostic_code: providerCode } : {}) };
    case 'mobile_push':
    case 'web_push':
      return recipient ? { [`${channel}_failed_token`]: recipient } : {};
    default:
      return {};
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

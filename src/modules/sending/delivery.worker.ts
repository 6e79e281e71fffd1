import { sql } from 'kysely';
import { deferred } from '../../storage/pg-prepared.js';
import type { Deps } from '../../deps.js';
import { asError, DeferJobError, isDeferral, type JobContext, PermanentJobError, type Queue } from '../../queue/port.js';
import { TemplateRenderError, buildRenderContext } from '../../rendering/liquid.js';
import { emailConditionHolds } from './email-condition.js';
import { RenderPool } from '../../rendering/render-pool.js';
import type { Channel } from '../../http/schemas.js';
import { type LedgerSession, successFields } from '../delivery/ledger.js';
import { zoneOrUtc } from '../digests/digest-schedule.js';
import type { CollectedDelivery, DigestsService } from '../digests/digests.service.js';
import type { TemplatesService } from '../templates/templates.service.js';
import type { UsersService } from '../users/users.service.js';
import { SEND_CHANNELS, type SendChannel, logNameOf } from './channels.js';
import { DELIVERY_RETRY_BASE_MS } from './retry-schedule.js';
import { type CallsStopOptions, DELIVERY_BATCH, DELIVER_JOB, FIRST_ATTEMPT_BATCH, type DeliveryTiming, DeliveryRuns, FIRST_ATTEMPT_BUDGET_MS, type HandedDelivery, MAX_DELIVERY_ATTEMPTS } from './delivery-runs.js';
import { carriedDigest, digestContent, digestScheduleOf } from './digest-routing.js';
import type { DeliverOutcome, Executors } from './executors/types.js';
import { INGEST_SENDS_JOB } from './messages.journal.js';
import { MessagesRepository, PROCESS_MESSAGE_JOB, type ProcessMessageJobData, messagesOfJob } from './messages.repository.js';
import { PLANNING_BUDGET_MS, PlanningBudget, type PlanningTiming, SlowAccounts } from './planning-budget.js';
import { PlanningReads } from './planning-reads.js';
import { type SkipReason, routeChannels } from './routing.js';
import { GateDecisions, type GateInput, gateInputOf, skipEvery } from './send-gates.js';
import type { SendBody } from './sending.schemas.js';
import { normalizeSend } from './sending.service.js';
import type { AttemptRow, DeliveryRow, MessageRow } from './sending.tables.js';
import type { DeliveryJobData } from './unrecorded-runs.js';

export { DELIVER_JOB, MAX_DELIVERY_ATTEMPTS };
/** failed_code of a message whose processing failed for good. */
export const PROCESSING_FAILED = 'PROCESSING_FAILED';

/**
 * The delivery engine: `message.process` (on SQLite, for immediate sends, `sends.ingest`) decides
 * routing and renders content, commits the deliveries pending, then makes their first provider
 * calls itself, before its job completes; a retry runs in a `delivery.run` job of its own. Both
 * are idempotent: a job re-run after a crash finds its work already committed and makes the first
 * attempts still missing (a delivery pending with no attempt), or redoes a provider call with the
 * same message id.
 */
/** The process's services the worker calls (the services object has them). */
export interface DeliveryWorkerServices {
  users: UsersService;
  templates: TemplatesService;
  digests: DigestsService;
}

export class DeliveryWorker {
  private readonly users: UsersService;
  private readonly templates: TemplatesService;
  private readonly digests: DigestsService;
  private readonly deliveries: DeliveryRuns;
  private readonly renders: RenderPool;
  private readonly ownRenders: boolean;
  private readonly planningBudgetMs: number;
  /** The accounts slow to plan, across this worker's batches (see SlowAccounts). */
  private readonly slowAccounts = new SlowAccounts();

  constructor(
    private readonly deps: Deps,
    private readonly queue: Queue,
    private readonly executors: Executors,
    services: DeliveryWorkerServices,
    /**
     * The retries' base wait (DELIVERY_RETRY_BASE_MS by default, see retry-schedule.ts), the
     * routing job's budget for first attempts, and each account's planning budget per batch.
     */
    timing: Partial<DeliveryTiming & PlanningTiming> = {},
    /**
     * Where content is rendered: worker threads, off the event loop that serves the API. Given, it
     * is the caller's to close (startWorkers shares it with the executors); else the worker's own.
     */
    renders?: RenderPool,
  ) {
    this.renders = renders ?? new RenderPool();
    this.ownRenders = renders === undefined;
    this.planningBudgetMs = timing.planningBudgetMs ?? PLANNING_BUDGET_MS;
    this.users = services.users;
    this.templates = services.templates;
    this.digests = services.digests;
    this.deliveries = new DeliveryRuns(deps, executors, this.users, { retryBaseMs: timing.retryBaseMs ?? DELIVERY_RETRY_BASE_MS, firstAttemptBudgetMs: timing.firstAttemptBudgetMs ?? FIRST_ATTEMPT_BUDGET_MS }, queue);
  }

  /**
   * The graceful stop of the provider calls, begun with the queue's stop: starts none any more and
   * waits (up to a bound, STOP_GRACE_MS) for those under way to be recorded, first attempts
   * handed over to stand-by jobs included (DeliveryRuns.stop). Before the executors and storage close.
   */
  stopCalls(options: CallsStopOptions = {}): Promise<void> {
    return this.deliveries.stop(options);
  }

  /** Stops the render threads it made itself (after the queue stopped). */
  async close(): Promise<void> {
    if (this.ownRenders) await this.renders.close();
  }

  register(options: { concurrency?: number } = {}): void {
    // Messages are routed in batches: one claim, transaction and completion for up to 16.
    // onFailed covers what a handler cannot see: a worker that died (kill -9, out of memory) on
    // the job's last attempt. Failures the handlers saw are recorded by them already.
    // Each batch makes the first attempts of the deliveries it routed (makeFirstAttempts), so a
    // batch holds its job while its mails go out; four at a time keep the SMTP pool busy.
    // On PostgreSQL an immediate send's job holds up to MESSAGES_PER_PROCESS_JOB (16): 4 jobs a
    // run keep a run near 64 messages, as SQLite's 4 ingest chunks do (16 of them, 256 messages,
    // held the embedded default's workers past their share of a busy process: bench postgres,
    // one process, 56% of the raw route against 79% at 4). A run of single-message jobs (scheduled
    // sends, broadcasts) is 4 messages there.
    this.queue.workBatch<ProcessMessageJobData>(PROCESS_MESSAGE_JOB, (items) => this.processMessageJobs(items), {
      concurrency: options.concurrency ?? 4,
      batchSize: this.deps.storage.dialect === 'postgres' ? 4 : 16,
      onFailed: (data, _job, error) => this.failMessages(messagesOfJob(data as ProcessMessageJobData), error),
    });
    // Retries (and deliveries handed to the queue): one claim, read and ledger transaction per
    // batch, the provider calls of a batch at once (DeliveryRuns). Two batches at a time.
    this.queue.workBatch<DeliveryJobData>(DELIVER_JOB, (items) => this.deliveries.run(items), {
      concurrency: options.concurrency ?? 2,
      batchSize: DELIVERY_BATCH,
      onFailed: (data, _job, error) => this.failDelivery((data as DeliveryJobData).deliveryId, error),
    });
    // Journal chunks (SQLite) a few at a time: one claim, processing and completion per batch
    // (ingestChunks). 16 while no request waits (a worker process, or between bursts): a chunk
    // holds the sends of one group commit, often a few, and every run costs its claim and about
    // four commits. Measured (bench email, worker process, chunks of about 4 mails): 4 chunks a
    // run delivered about 980 msg/s with 535 µs of main-thread CPU per mail, 16 about 1,280 with
    // 400 µs. While the API of the same process is busy, 16 took the embedded default's
    // acceptance to 92.6% of 4's (bench send, after vs before): then 4.
    this.queue.workBatch<{ seq: number }>(INGEST_SENDS_JOB, (items) => this.ingestChunks(items, { makeFirstAttempts: true }), {
      concurrency: options.concurrency ?? 2,
      batchSize: 4,
      idleBatchSize: 16,
      onFailed: (data, _job, error) => this.failIngestChunk((data as { seq: number }).seq, error),
    });
  }

  /**
   * Marks failed, with PROCESSING_FAILED and the reason, those of these messages still queued or
   * scheduled, and the deliveries of theirs still waiting for a first attempt: the job that was
   * to make it was given up, and no other will.
   */
  async failMessages(trackingIds: string[], reason: string): Promise<void> {
    const failure = { at: this.deps.clock.now().toISOString(), code: PROCESSING_FAILED, reason };
    await this.deps.ledger.transaction(async (tx) => {
      await tx.failMessages(trackingIds, failure);
      for (const delivery of await new MessagesRepository(tx.db).firstAttemptsPending(trackingIds)) await tx.deliveryFailed(delivery.id, null, failure);
    });
  }

  /**
   * A delivery whose job was given up without its handler recording why (its worker died on the
   * last attempt, or the failure could not be written): failed with PROCESSING_FAILED, if still pending.
   */
  async failDelivery(deliveryId: string, reason: string): Promise<void> {
    await this.deps.ledger.failDelivery(deliveryId, { at: this.deps.clock.now().toISOString(), code: PROCESSING_FAILED, reason });
  }

  /** One row at a time, so one row that cannot be written does not keep the others back. */
  private async storeEach(messages: Parameters<MessagesRepository['insertMessagesIfAbsent']>[0]): Promise<void> {
    const repo = new MessagesRepository(this.deps.db);
    for (const message of messages) {
      await repo.insertMessagesIfAbsent([message]).catch((err: unknown) => this.deps.logger.error({ err, trackingId: message.tracking_id }, 'an accepted send could not be stored'));
    }
  }

  /** An ingest chunk given up for good: its sends are stored (if they were not) and end failed. */
  private async failIngestChunk(seq: number, reason: string): Promise<void> {
    const repo = new MessagesRepository(this.deps.db);
    const messages = await repo.pendingChunk(seq);
    if (!messages) return;
    await this.storeEach(messages);
    await this.failMessages(messages.map((m) => m.tracking_id), reason);
    await repo.dropPendingChunk(seq);
  }

  /**
   * message.process jobs: routes their messages (one each, or a chunk on PostgreSQL) in one
   * batch, then makes the first attempts of their deliveries (makeFirstAttempts); a message whose
   * processing failed for good ends failed in its log. Per job: a failure not recorded yet (the
   * job runs again; messages already processed are not routed twice), else a job of one message
   * ends with that message's failure, and a chunk whose messages' failures are all recorded
   * completes: its onFailed would fail the deliveries of the chunk's other messages still
   * waiting for their first attempt (one held by a stand-by job, say).
   */
  async processMessageJobs(items: { data: ProcessMessageJobData; job: JobContext }[]): Promise<unknown[]> {
    const owned = items.map((item) => messagesOfJob(item.data));
    const trackingIds = owned.flat();
    const jobOf = items.flatMap((item, k) => owned[k].map(() => item.job));
    const routed = await this.route(trackingIds);
    const failures = await this.makeFirstAttempts(trackingIds, routed);
    const recorded = await this.recordFinalFailures(trackingIds, failures, (i) => jobOf[i]);
    let at = 0;
    return owned.map((ids) => {
      const own = failures.slice(at, at + ids.length);
      const ownRecorded = recorded.slice(at, at + ids.length);
      at += ids.length;
      return unsettled(own, ownRecorded) ?? (ids.length === 1 ? own[0] : undefined);
    });
  }

  /**
   * The first attempts of what `route` left to deliver: the deliveries it committed, and those a
   * run before committed and never attempted (this is a re-run after a crash); in batches of
   * FIRST_ATTEMPT_BATCH, run at once, each recorded as its calls end. Returns `routed.failures` with,
   * for each message whose first attempts could not all be recorded, that error: its job runs
   * again and makes them.
   */
  private async makeFirstAttempts(trackingIds: string[], routed: Routed): Promise<unknown[]> {
    const handed = [...routed.handed];
    if (routed.resumed.size > 0) {
      for (const delivery of await new MessagesRepository(this.deps.db).firstAttemptsPending([...routed.resumed.keys()])) {
        // An earlier run may have made this call and died before recording it: its executor is told.
        handed.push({ delivery, message: routed.resumed.get(delivery.tracking_id)!, resumed: true });
      }
    }
    const failures = [...routed.failures];
    if (handed.length === 0) return failures;
    const batches: HandedDelivery[][] = [];
    for (let i = 0; i < handed.length; i += FIRST_ATTEMPT_BATCH) batches.push(handed.slice(i, i + FIRST_ATTEMPT_BATCH));
    const budget = firstAttemptDeadline(this.deliveries.firstAttemptBudgetMs);
    let results: unknown[];
    try {
      results = (await Promise.all(batches.map((batch) => this.deliveries.runFirst(batch, budget.deadline)))).flat();
    } finally {
      budget.clear();
    }
    const unmade = new Map<string, unknown>();
    for (const [i, result] of results.entries()) if (result !== undefined) unmade.set(handed[i].delivery.tracking_id, result);
    for (const [index, trackingId] of trackingIds.entries()) if (unmade.has(trackingId)) failures[index] ??= unmade.get(trackingId);
    return failures;
  }

  /**
   * Marks failed, with PROCESSING_FAILED and the error as reason, each message whose failure is
   * final (a PermanentJobError, or the job's last attempt): otherwise its log would say queued
   * forever once the queue gives the job up. Returns which failures were recorded.
   */
  private async recordFinalFailures(trackingIds: string[], failures: unknown[], jobOf: (index: number) => JobContext): Promise<boolean[]> {
    const recorded = failures.map(() => false);
    for (const [index, failure] of failures.entries()) {
      if (failure === undefined || !isFinal(failure, jobOf(index))) continue;
      try {
        await this.failMessages([trackingIds[index]], errorText(failure));
        recorded[index] = true;
      } catch (err) {
        this.deps.logger.error({ err, trackingId: trackingIds[index], failure }, 'recording the final failure of a message failed');
      }
    }
    return recorded;
  }

  /**
   * The job of a chunk of accepted sends the messages repository holds back (SQLite's journal):
   * writes its message rows, processes them as message.process does, then drops the chunk. A re-run after a crash finds the rows written
   * and the messages processed, and only drops the chunk; a message that failed leaves the
   * chunk in place and the job retries it, until its failure is final (recordFinalFailures).
   */
  async ingestSends(seq: number, job: JobContext = { id: '', name: INGEST_SENDS_JOB, attempt: 1, maxAttempts: Number.POSITIVE_INFINITY }): Promise<void> {
    const [failure] = await this.ingestChunks([{ data: { seq }, job }]);
    if (failure !== undefined) throw asError(failure);
  }

  /**
   * ingestSends for a batch of chunk jobs at once: the rows of every chunk in one INSERT, their
   * messages processed in one batch (one planning read, one ledger transaction), the chunks
   * dropped in one transaction. Per job the outcome is what ingestSends alone would have had.
   * Measured reason: a group commit of the API makes a chunk of a few sends (about 5 at 50
   * connections), and a chunk alone cost five commits (claim, rows, processing, drop, job
   * completion), about one per send. Returns, per job in order, undefined or its error.
   * `makeFirstAttempts` (the job's handler): the first attempts of the deliveries routed are made
   * before the chunks are dropped, so a crash before they are recorded leaves the job and its
   * chunks, and the job's re-run makes them. Without it the deliveries wait pending (tests).
   */
  async ingestChunks(items: { data: { seq: number }; job: JobContext }[], options: { makeFirstAttempts?: boolean } = {}): Promise<unknown[]> {
    const repo = new MessagesRepository(this.deps.db);
    const results: unknown[] = items.map(() => undefined);
    let chunks: { index: number; seq: number; job: JobContext; messages: MessageRow[] }[] = [];
    for (const [index, { data, job }] of items.entries()) {
      const messages = await repo.pendingChunk(data.seq);
      if (messages) chunks.push({ index, seq: data.seq, job, messages });
    }
    if (chunks.length === 0) return results;
    try {
      // One commit for the batch's rows: on SQLite they take a statement per size (64, 32, ...),
      // each of which would otherwise commit on its own.
      const all = chunks.flatMap((c) => c.messages);
      await this.deps.db.transaction().execute((trx) => new MessagesRepository(trx).insertMessagesIfAbsent(all));
    } catch {
      // Chunk by chunk then, as each job alone would.
      const stored: typeof chunks = [];
      for (const c of chunks) {
        try {
          await repo.insertMessagesIfAbsent(c.messages);
          stored.push(c);
        } catch (err) {
          if (!isFinal(err, c.job)) {
            results[c.index] = err;
            continue;
          }
          await this.storeEach(c.messages);
          stored.push(c);
        }
      }
      chunks = stored;
    }
    const trackingIds = chunks.flatMap((c) => c.messages.map((m) => m.tracking_id));
    const jobOf = chunks.flatMap((c) => c.messages.map(() => c.job));
    const routed = await this.route(trackingIds);
    const failures = options.makeFirstAttempts ? await this.makeFirstAttempts(trackingIds, routed) : routed.failures;
    const recorded = await this.recordFinalFailures(trackingIds, failures, (i) => jobOf[i]);
    const processed: number[] = [];
    let at = 0;
    for (const c of chunks) {
      const own = failures.slice(at, at + c.messages.length);
      const ownRecorded = recorded.slice(at, at + c.messages.length);
      at += c.messages.length;
      const pending = unsettled(own, ownRecorded);
      if (pending !== undefined) {
        results[c.index] = pending;
        continue;
      }
      processed.push(c.seq);
      const failure = own.find((f) => f !== undefined);
      // Recorded as the messages' failure; the job ends failed too, without a retry.
      if (failure !== undefined) results[c.index] = new PermanentJobError(errorText(failure));
    }
    if (processed.length > 0) {
      await this.deps.db.transaction().execute(async (trx) => {
        const inTx = new MessagesRepository(trx);
        for (const seq of processed) await inTx.dropPendingChunk(seq);
      });
    }
    return results;
  }

  /** Routes and renders one message (see processMessages). */
  async processMessage(trackingId: string): Promise<void> {
    const [failure] = await this.processMessages([trackingId]);
    if (failure !== undefined) throw asError(failure);
  }

  /**
   * Routes and renders a batch of messages, then writes all of them (deliveries, in-app
   * notifications) in one transaction, each in its own savepoint. What planning reads is read
   * once per batch (PlanningReads). Returns, per message, undefined or the error that failed it
   * alone. The deliveries it writes wait pending: the jobs' handlers make their first attempts
   * (makeFirstAttempts).
   */
  async processMessages(trackingIds: string[]): Promise<unknown[]> {
    return (await this.route(trackingIds)).failures;
  }

  /** processMessages, and what it leaves to deliver (Routed). */
  private async route(trackingIds: string[]): Promise<Routed> {
    const routed: Routed = { failures: trackingIds.map(() => undefined), handed: [], resumed: new Map() };
    const failures = routed.failures;
    let reads: PlanningReads;
    try {
      reads = await PlanningReads.of(this.deps, this.users, this.templates, trackingIds);
    } catch (err) {
      routed.failures = trackingIds.map(() => err);
      return routed;
    }
    const plans: { index: number; plan: MessagePlan }[] = [];
    // One time for the batch: its messages are processed together.
    const now = this.deps.clock.now().toISOString();
    // An account whose templates render slowly takes its share of the batch, not all of it.
    const budget = new PlanningBudget(this.deps.clock, this.planningBudgetMs, this.slowAccounts);
    for (const [index, trackingId] of trackingIds.entries()) {
      const message = reads.message(trackingId);
      // Processed by a run before this one: it may have left first attempts to make.
      if (message?.state === 'processed') routed.resumed.set(trackingId, message);
      const toPlan = message?.state === 'queued' || message?.state === 'scheduled';
      const deferral = toPlan ? budget.deferral(message.account_id) : null;
      if (toPlan && deferral) {
        // Its job goes to the back of the queue; its re-run finds what this run committed.
        failures[index] = new DeferJobError(
          deferral === 'budget'
            ? `account ${message.account_id} took its planning budget of this batch (${this.planningBudgetMs} ms)`
            : `account ${message.account_id} is slow to plan and another batch plans one of its messages`,
        );
        continue;
      }
      try {
        const plan = message ? await budget.measure(message.account_id, () => this.plan(trackingId, reads, now)) : null;
        if (plan) plans.push({ index, plan });
      } catch (err) {
        failures[index] = err;
      }
    }
    budget.settle();
    if (plans.length === 0) return routed;
    const afterCommit: (() => Promise<void>)[] = [];
    // The messages this run moved on (another run may have processed some: their rows are not written).
    const committed = new Set<string>();
    // The ledger writes the batch's delivery events together, just before the commit.
    await this.deps.ledger.transaction(async (tx) => {
      const trx = tx.db;
      // Deduplication and throttling first: their counters are taken in one order for the batch.
      const gates = await GateDecisions.decide(
        trx,
        plans.flatMap(({ plan }) => (plan.gate ? [plan.gate] : [])),
        this.deps.storage.sqlite,
      );
      for (const { plan } of plans) {
        const verdict = gates.verdicts.get(plan.trackingId);
        if (verdict) skipEvery(plan, verdict);
      }
      // Messages written together: a few statements for the batch instead of five per message
      // (their in-app deliveries too: one INSERT for the batch). Should that fail, each message
      // is written alone in its own savepoint, as the others are. Messages that collect into
      // digests write digest rows too: alone.
      const together = plans.filter(({ plan }) => plan.collected.length === 0);
      let alone = plans;
      const applied = together.length > 1 ? await this.applyTogether(tx, together.map((p) => p.plan), now) : null;
      if (applied) {
        for (const id of applied.moved) committed.add(id);
        afterCommit.push(...applied.afterCommit);
        const done = new Set(together);
        alone = plans.filter((p) => !done.has(p));
      }
      for (const { index, plan } of alone) {
        // Deferred (PgClient): sent with the message's first statement. RELEASE is waited for, so a
        // failure of a deferred write of this message is thrown here, inside its savepoint.
        await sql.raw(deferred('savepoint process_message')).execute(trx);
        const events = tx.checkpoint();
        try {
          const after = await this.apply(tx, plan);
          await sql`release savepoint process_message`.execute(trx);
          if (after) {
            committed.add(plan.trackingId);
            afterCommit.push(...after);
          }
        } catch (err) {
          await sql`rollback to savepoint process_message`.execute(trx);
          await sql`release savepoint process_message`.execute(trx);
          tx.rollbackTo(events);
          failures[index] = err;
        }
      }
      await gates.undo(committed);
    });
    for (const { plan } of plans) {
      if (!committed.has(plan.trackingId)) continue;
      for (const row of plan.rows) if (row.status === 'pending') routed.handed.push({ delivery: row, message: plan.message });
    }
    // Started in order, run together: the in-app publishes of a batch share their NOTIFY statement (InappRealtime).
    await Promise.all(afterCommit.map((run) => run().catch((err: unknown) => this.deps.logger.warn({ err }, 'after-commit step of a delivery failed'))));
    return routed;
  }

  /**
   * Makes the pending deliveries of `plans` that their channel makes inside the processing
   * transaction (in-app): one executor call per channel for all of them. Leaves the planned rows
   * as they are (a rolled-back batch writes its messages alone from them): answers `rows`, the
   * plans' rows to write with the delivered ones in their success state, `delivered` (planned row
   * -> its delivered state, for `adopt` once written), their attempts and the steps to run after
   * the commit, in order.
   */
  private async deliverHere(trx: LedgerSession['db'], plans: MessagePlan[]): Promise<DeliveredHere> {
    const byChannel = new Map<SendChannel, { plan: MessagePlan; row: DeliveryRow }[]>();
    for (const plan of plans) {
      for (const row of plan.rows) {
        const channel = channelOf(row.channel);
        if (row.status !== 'pending' || !this.executors[channel]?.deliverInTransaction) continue;
        const items = byChannel.get(channel) ?? [];
        items.push({ plan, row });
        byChannel.set(channel, items);
      }
    }
    const delivered = new Map<DeliveryRow, DeliveryRow>();
    const attempts: AttemptRow[] = [];
    const afterCommit: (() => Promise<void>)[] = [];
    for (const [channel, items] of byChannel) {
      const started = this.deps.clock.now();
      const inputs = items.map(({ plan: { message, body }, row }) => ({ delivery: row, message, content: JSON.parse(row.content ?? '{}') as Record<string, unknown>, body }));
      const outcomes = await this.executors[channel]!.deliverInTransaction!(trx, inputs);
      const at = this.deps.clock.now();
      for (const [i, { row }] of items.entries()) {
        const outcome = outcomes[i];
        delivered.set(row, { ...row, ...successFields(succeeded(outcome, at.toISOString()), 1) });
        attempts.push(successAttempt(this.deps.ids.uuid(), row.id, 1, started, at, outcome));
        if (outcome.afterCommit) afterCommit.push(outcome.afterCommit);
      }
    }
    const rows = plans.flatMap((plan) => plan.rows.map((row) => delivered.get(row) ?? row));
    return { rows, attempts, afterCommit, adopt: () => delivered.forEach((state, row) => Object.assign(row, state)) };
  }

  /**
   * Writes planned messages that collect nothing into digests, inside the ledger's transaction
   * `tx`: one UPDATE of the messages, their in-transaction deliveries (deliverHere), one INSERT of
   * their deliveries and attempts. In a savepoint; answers the messages it moved on with the steps
   * to run after the commit, or null (and nothing written) when a statement failed.
   */
  private async applyTogether(tx: LedgerSession, plans: MessagePlan[], now: string): Promise<{ moved: Set<string>; afterCommit: (() => Promise<void>)[] } | null> {
    const trx = tx.db;
    await sql`savepoint process_messages`.execute(trx);
    const events = tx.checkpoint();
    try {
      const moved = await tx.markProcessedMany(plans.map(({ message, skipped }) => ({ message, skipped })), now);
      // Only the run that moves a message on writes its deliveries (a re-run after a crash finds it processed).
      const movedPlans = plans.filter((p) => moved.has(p.trackingId));
      const here = await this.deliverHere(trx, movedPlans);
      await tx.insertDeliveries(here.rows, here.attempts);
      await sql`release savepoint process_messages`.execute(trx);
      here.adopt();
      return { moved, afterCommit: here.afterCommit };
    } catch (err) {
      await sql`rollback to savepoint process_messages`.execute(trx);
      await sql`release savepoint process_messages`.execute(trx);
      tx.rollbackTo(events);
      this.deps.logger.warn({ err, messages: plans.length }, 'writing a batch of processed messages failed; writing them one by one');
      return null;
    }
  }

  /** Everything one message will write, read and rendered outside the transaction; null: nothing to do. */
  private async plan(trackingId: string, reads: PlanningReads, now: string): Promise<MessagePlan | null> {
    const message = reads.message(trackingId);
    if (!message || (message.state !== 'queued' && message.state !== 'scheduled')) return null;
    const body = JSON.parse(message.request) as SendBody;
    const send = normalizeSend({ ...body, to: body.to ?? body.user ?? { id: message.user_id } });

    const found = reads.user(message);
    const user = found?.user;
    const env = await reads.environment(message);
    if (!user || !env) {
      await this.deps.ledger.failMessages([trackingId], {
        at: now,
        code: user ? 'ENVIRONMENT_DELETED' : 'USER_DELETED',
        reason: 'the recipient or environment was deleted before delivery',
      });
      return null;
    }
    const type = await reads.type(message);

    const contents = new Map<SendChannel, Record<string, unknown>>();
    // A digest's own message: its channel only, rendered by the type's digest template.
    const carried = await carriedDigest(reads, message, body);
    if (carried) {
      const digest = await digestContent(reads, message, carried);
      if (digest) contents.set(digest.channel, digest.content);
    } else {
      const templated = await reads.channelsWithTemplates(message);
      for (const { channel } of SEND_CHANNELS) {
        const inline = this.executors[channel]?.fromInline(body) ?? inlineOf(body, channel);
        if (inline) contents.set(channel, inline);
        else if (templated.has(channel)) {
          const template = await reads.resolveTemplate(message, channel, body.templateId);
          if (template) contents.set(channel, template.content as Record<string, unknown>);
        }
      }
    }

    const suppressed = new Set(Object.keys(found.suppressions));
    // A STOP holds for the number, whichever user record carries it.
    if (reads.smsOptedOut(message)) suppressed.add('SMS');
    const off = reads.channelsOff(message, type);
    const decisions = routeChannels({
      forceChannels: body.forceChannels,
      withContent: new Set(contents.keys()),
      type: { enabled: type.enabled, channels: type.channels },
      user: { ...user, suppressed, off: off.byUser, offByDefault: off.byDefault },
      disabledForEnvironment: JSON.parse(env.disable_sending) as Channel[],
      available: new Set(Object.keys(this.executors) as SendChannel[]),
    });

    const context = buildRenderContext(send.parameters, user as unknown as Record<string, unknown>);
    const resolveComponents = reads.components(message);
    const rows: DeliveryRow[] = [];
    const collected: CollectedDelivery[] = [];
    const forced = Boolean(body.forceChannels?.length);
    const skipped: Record<string, string> = {};
    const emailCondition = body.options?.email?.condition;
    for (const decision of decisions) {
      if (decision.routing === 'SKIP') {
        skipped[logNameOf(decision.channel)] = decision.reason;
        continue;
      }
      let conditionError: TemplateRenderError | undefined;
      if (decision.channel === 'EMAIL' && emailCondition) {
        try {
          if (!(await emailConditionHolds(this.renders, emailCondition, context, message.account_id))) {
            skipped.email = 'CONDITION_NOT_MET' satisfies SkipReason;
            continue;
          }
        } catch (err) {
          if (!(err instanceof TemplateRenderError)) throw err;
          conditionError = err;
        }
      }
      const row: DeliveryRow = {
        id: this.deps.ids.uuid(),
        tracking_id: trackingId,
        account_id: message.account_id,
        env_id: message.env_id,
        channel: logNameOf(decision.channel),
        routing: 'SEND',
        routing_reason: null,
        status: 'pending',
        content: null,
        preview: null,
        attempts: 0,
        sent_at: null,
        delivered_at: null,
        failed_at: null,
        failed_code: null,
        failed_internal: null,
        provider_message_id: null,
        extra: null,
        created_at: now,
        updated_at: now,
      };
      try {
        if (conditionError) throw conditionError;
        const source = contents.get(decision.channel)!;
        const executor = this.executors[decision.channel]!;
        // In the account's turn: another tenant's renders waiting for a thread do not hold this one.
        const rendered = await this.renders.render(decision.channel, source, context, { resolveComponents, tenant: message.account_id });
        const planned = executor.planned?.(rendered, { message, source, type, parameters: send.parameters ?? {}, user: user as unknown as Record<string, unknown> }) ?? rendered;
        row.content = JSON.stringify(planned);
        row.preview = executor.preview(rendered).slice(0, 500);
      } catch (err) {
        if (!(err instanceof TemplateRenderError)) throw err;
        Object.assign(row, { status: 'failed', failed_at: now, failed_code: 'TEMPLATE_RENDER_FAILED', failed_internal: err.message });
      }
      // Rendered now (its preview and content are the digest's item); sent later, in the digest.
      const schedule = carried || row.status !== 'pending' ? null : digestScheduleOf(reads, message, type, decision.channel, forced);
      if (schedule) {
        row.status = 'digested';
        collected.push({ row, userId: message.user_id, notificationId: message.notification_id, schedule, zone: zoneOrUtc(user.timezone) });
      }
      rows.push(row);
    }

    // A digest's own message is not gated: its items were, when they were sent.
    return { trackingId, message, body, now, skipped, rows, collected, gate: rows.length > 0 && !carried ? gateInputOf(message, body, type) : undefined };
  }

  /**
   * Writes one planned message inside the ledger's transaction `tx`; returns what to run once it
   * committed, or null when another run had processed the message.
   */
  private async apply(tx: LedgerSession, plan: MessagePlan): Promise<(() => Promise<void>)[] | null> {
    const { message, now, skipped, collected } = plan;
    // Only the run that moves the message on writes its deliveries (a re-run after a crash finds it processed).
    const moved = await tx.markProcessed(message, { at: now, skipped });
    if (!moved) return null;
    const here = await this.deliverHere(tx.db, [plan]);
    // Collected deliveries join their digests in this transaction: durable with the routing decision.
    const items = collected.length > 0 ? await this.digests.collect(tx, collected, now) : [];
    await tx.insertDeliveries(here.rows, here.attempts);
    if (items.length > 0) await this.digests.addItems(tx, items);
    // A failure from here on fails the message alone, and its plan is not used again.
    here.adopt();
    return here.afterCommit;
  }

  /** Runs one delivery's job now, as a batch of one (see DeliveryRuns). */
  async runDelivery(deliveryId: string, job: JobContext = { id: '', name: DELIVER_JOB, attempt: 1, maxAttempts: MAX_DELIVERY_ATTEMPTS + 2 }): Promise<void> {
    const [failure] = await this.deliveries.run([{ data: { deliveryId }, job }]);
    if (failure !== undefined) throw asError(failure);
  }
}

/** What a routing run did: per message its failure, and the first attempts it leaves to make. */
interface Routed {
  /** Per message in order, undefined or the error that failed it alone. */
  failures: unknown[];
  /** The pending deliveries this run committed, with their messages. */
  handed: HandedDelivery[];
  /** Messages a run before had processed already, by tracking id: their deliveries may still wait for a first attempt. */
  resumed: Map<string, MessageRow>;
}

/** What deliverHere made inside the transaction (see there). */
interface DeliveredHere {
  rows: DeliveryRow[];
  attempts: AttemptRow[];
  afterCommit: (() => Promise<void>)[];
  /** Gives the planned rows their delivered state, once written: the routing hands on only those still pending. */
  adopt(): void;
}

/** What plan() read and rendered for one message, for apply() to write. */
interface MessagePlan {
  trackingId: string;
  message: MessageRow;
  body: SendBody;
  now: string;
  skipped: Record<string, string>;
  rows: DeliveryRow[];
  /** Rows (status digested) that go into digests instead of out now. */
  collected: CollectedDelivery[];
  /** Present when the message routes to a channel and its type deduplicates or throttles. */
  gate?: GateInput;
}

const channelOf = (log: string) => SEND_CHANNELS.find((c) => c.log === log)!.channel;

/** A successful provider call (or local delivery), as the ledger records it. */
function succeeded(outcome: DeliverOutcome, at: string) {
  return { delivered: outcome.delivered, at, providerMessageId: outcome.result.providerMessageId ?? null, extra: outcome.extra ?? null };
}

function successAttempt(id: string, deliveryId: string, attempt: number, started: Date, at: Date, outcome: DeliverOutcome): AttemptRow {
  return {
    id,
    delivery_id: deliveryId,
    attempt,
    started_at: started.toISOString(),
    duration_ms: Math.max(0, at.getTime() - started.getTime()),
    outcome: 'success',
    provider_code: null,
    detail: outcome.result.response?.slice(0, 1000) ?? null,
  };
}

function inlineOf(body: SendBody, channel: SendChannel): Record<string, unknown> | null {
  const key = SEND_CHANNELS.find((c) => c.channel === channel)!.body;
  const value = (body as Record<string, unknown>)[key];
  return value && typeof value === 'object' ? { ...(value as Record<string, unknown>) } : null;
}

/**
 * A job's outcome from its messages' failures: one not recorded yet (the job runs again), a real
 * failure before a deferral (a retry re-plans the deferred messages too); undefined when every
 * failure is recorded.
 */
function unsettled(failures: unknown[], recorded: boolean[]): unknown {
  const pending = failures.filter((f, i) => f !== undefined && !recorded[i]);
  return pending.find((f) => !isDeferral(f)) ?? pending[0];
}

/** No run will follow: the error says so, or this was the job's last attempt (a deferral never is: it does not count as one). */
function isFinal(err: unknown, job: JobContext): boolean {
  if (isDeferral(err)) return false;
  return err instanceof PermanentJobError || (err as Error | undefined)?.name === 'PermanentJobError' || job.attempt >= job.maxAttempts;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export type { MessageRow };

/**
 * The routing job's budget for first attempts, as a promise that resolves when it is spent (none
 * with 0). Real time: it bounds how long a job's slot waits on providers, whatever the clock says.
 */
function firstAttemptDeadline(budgetMs: number): { deadline?: Promise<void>; clear(): void } {
  if (budgetMs <= 0) return { clear() {} };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, budgetMs);
    timer.unref();
  });
  return { deadline, clear: () => clearTimeout(timer) };
}

import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';

/**
 * The Queue port: durable jobs enqueued in the caller's database transaction, so a job exists
 * exactly when the records it works on were committed (DESIGN principle 2). Delivery is
 * at-least-once: a job whose worker dies is picked up again after its lock expires, so handlers
 * must be idempotent.
 */
export interface JobContext {
  id: string;
  name: string;
  /** 1 on the first run. */
  attempt: number;
  maxAttempts: number;
}

export interface EnqueueOptions {
  /** Not before this time (scheduling). Default: now. */
  runAt?: Date;
  /** Runs (first + retries) before the job is given up. Default 10. */
  maxAttempts?: number;
  /**
   * At most one job of this name per key, ever: an enqueue whose key was used already inserts
   * nothing and answers the same id. For jobs that every process schedules and one must run
   * (the hourly purge: one key per hour).
   */
  key?: string;
}

/** The id of the one job of `name` with `key` (a UUID-shaped digest, valid in both engines). */
export function keyedJobId(name: string, key: string): string {
  const hex = createHash('sha256').update(`${name}\n${key}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

export type JobHandler<T = unknown> = (data: T, job: JobContext) => Promise<void>;

/**
 * Handles several jobs of one name at once (e.g. in one transaction). Returns, per item in
 * order, undefined when that job is done or the error it failed with (treated as if a single
 * handler had thrown it). A batch that throws as a whole is run again item by item, so one bad
 * job cannot fail the others.
 */
export type BatchJobHandler<T = unknown> = (items: { data: T; job: JobContext }[]) => Promise<unknown[]>;

export interface WorkOptions {
  /** Jobs (or batches, with workBatch) of this name run at once in this process. */
  concurrency?: number;
  /**
   * Called once a job has failed for good (a PermanentJobError, its last attempt, or its worker
   * lost on the last attempt), before the queue records it failed, so the records the job works
   * on can say so. At-least-once like handlers: must be idempotent. Its own errors are logged.
   */
  onFailed?: (data: unknown, job: JobContext, error: string) => Promise<void>;
}

export interface BatchWorkOptions extends WorkOptions {
  /** Most jobs per batch; fewer when fewer are due. */
  batchSize: number;
  /**
   * Most jobs per batch while no API request in this process waits for the event loop (a worker
   * process, or the embedded default between bursts): bigger runs mean fewer claims and commits
   * per job, and nothing waits behind them. batchSize when absent.
   */
  idleBatchSize?: number;
}

/** One job of enqueueMany. */
export interface JobToEnqueue {
  name: string;
  data: unknown;
  options?: EnqueueOptions;
}

/**
 * The database (or transaction) a job is written with. The queue keeps its own tables on
 * whichever connection the caller holds, whatever that caller's table types are, so this is the
 * one place the queue accepts any Kysely.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any caller's Kysely, see above
export type JobDb = Kysely<any>;

/** The jobs of one name waiting to run (for the queue gauges of /metrics). */
export interface QueueDepth {
  name: string;
  /** Due now: their run time has come and no worker has claimed them yet. */
  due: number;
  /** Waiting for a later run time (scheduled sends, retries backing off). */
  delayed: number;
  /** How long the longest-waiting due job has been due; 0 with none due. */
  oldestDueSeconds: number;
}

export interface Queue {
  /** Inserts the job with the transaction (or plain db) given; returns its id. */
  enqueue<T>(tx: JobDb, name: string, data: T, options?: EnqueueOptions): Promise<string>;
  /**
   * enqueue() for many jobs at once (a batch of accepted sends), in as few statements as the
   * engine allows; returns their ids in order.
   */
  enqueueMany(tx: JobDb, jobs: JobToEnqueue[]): Promise<string[]>;
  /** Cancels a job that has not started; false when it is running, finished or unknown. */
  cancel(tx: JobDb, jobId: string): Promise<boolean>;
  /** Moves a job that has not started to another time and/or payload; false when it already ran. */
  reschedule<T>(tx: JobDb, jobId: string, runAt: Date, data?: T): Promise<boolean>;
  /** Registers the handler of a job name; call before start(). */
  work<T>(name: string, handler: JobHandler<T>, options?: WorkOptions): void;
  /** Like work(), with jobs claimed, handled and completed in batches. */
  workBatch<T>(name: string, handler: BatchJobHandler<T>, options: BatchWorkOptions): void;
  start(): Promise<void>;
  /** Stops taking jobs, waits for running handlers (up to a grace period), releases the rest. */
  stop(): Promise<void>;
  /** Waiting jobs per name, read from the queue's tables (so every process's jobs); names with none may be absent. */
  depths(): Promise<QueueDepth[]>;
}

/** A handler's failure as an Error (failures are Errors; anything else thrown is wrapped). */
export function asError(failure: unknown): Error {
  if (failure instanceof Error) return failure;
  return new Error(typeof failure === 'string' ? failure : JSON.stringify(failure) ?? 'undefined');
}

/** Thrown by a handler: do not retry this job. */
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
}

/**
 * Thrown by a handler: retry, after `delayMs` when given (else the queue's backoff). The run
 * still counts as an attempt, so a job that keeps asking for retries ends 'failed' at maxAttempts.
 */
export class RetryJobError extends Error {
  override name = 'RetryJobError';
  constructor(
    message: string,
    readonly delayMs?: number,
  ) {
    super(message);
  }
}

/**
 * Thrown by a handler (or answered by a batch handler for a job): not now. The job goes back to
 * the queue, due after `delayMs` (default at once) and behind every job of its name that was due
 * before it, and this run does not count as an attempt: a job may be deferred any number of times.
 * For work that is fine but must give way to others' (a tenant over its share of planning time,
 * see docs/fairness.md); a handler that defers must make progress on each run, or the job never ends.
 */
export class DeferJobError extends Error {
  override name = 'DeferJobError';
  constructor(
    message: string,
    readonly delayMs = 0,
  ) {
    super(message);
  }
}

/** The failure is a DeferJobError (also one from another copy of this module). */
export function isDeferral(failure: unknown): failure is DeferJobError {
  return failure instanceof DeferJobError || (failure as Error | undefined)?.name === 'DeferJobError';
}

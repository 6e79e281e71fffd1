import { BusyGate } from './busy-gate.js';
import { asError, type BatchJobHandler, type BatchWorkOptions, type JobContext, type JobHandler, isDeferral, PermanentJobError, RetryJobError, type WorkOptions } from './port.js';

/** A job this process holds the lock of. `token` fences writes: a stale holder changes nothing. */
export interface ClaimedJob {
  id: string;
  name: string;
  data: unknown;
  attempt: number;
  maxAttempts: number;
  token: unknown;
}

/** What an engine provides to the shared runner (SQLite table or pg-boss). */
export interface JobBackend {
  claim(name: string, limit: number): Promise<ClaimedJob[]>;
  complete(job: ClaimedJob): Promise<void>;
  retry(job: ClaimedJob, delayMs: number, error: string): Promise<void>;
  fail(job: ClaimedJob, error: string): Promise<void>;
  /** complete() for several jobs at once (one commit); optional. */
  completeMany?(jobs: ClaimedJob[]): Promise<void>;
  /** Gives jobs back at once without counting the interrupted run as an attempt. */
  release(jobs: ClaimedJob[]): Promise<void>;
  /**
   * Gives a job back on its handler's DeferJobError: due after `delayMs`, claimed after the jobs
   * of its name due before now (it goes to the back of the line), the run not counted as an attempt.
   */
  defer(job: ClaimedJob, delayMs: number): Promise<void>;
  /** Extends the locks of jobs still running here. */
  heartbeat(jobs: ClaimedJob[]): Promise<void>;
  /** Called before the first claim of each name. */
  prepare?(names: string[]): Promise<void>;
  /**
   * Of these names, those that may have a job to claim now; optional. A timer poll asks it first
   * and claims only those, so an idle worker reads once per poll instead of claiming (a write)
   * once per name. A name it leaves out must have nothing a claim would take.
   */
  dueNames?(names: string[]): Promise<Set<string>>;
}

export interface QueueLogger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface BackoffOptions {
  /** First retry waits up to this long (full jitter). Default 1000 ms. */
  baseMs?: number;
  /** Upper bound of any backoff delay. Default 1 h. */
  capMs?: number;
}

export interface RunnerOptions {
  pollIntervalMs: number;
  heartbeatMs: number;
  graceMs: number;
  backoff?: BackoffOptions;
  random?: () => number;
  logger?: QueueLogger;
  /** While true, job starts are spaced so that runs take about busyShare of the time (see BusyGate, ApiLoad). */
  busy?: () => boolean;
  /** Share of the time runs may take while busy. Default 0.1. */
  busyShare?: number;
  /** Waits out stop()'s grace period (see GraceTimer). Default: a real timer. */
  graceTimer?: GraceTimer;
}

/**
 * Resolves once `ms` have passed, or at once when `signal` aborts (every handler ended first).
 * Tests pass one they end by hand, so "a handler outlives the grace period" needs no race.
 */
export type GraceTimer = (ms: number, signal: AbortSignal) => Promise<void>;

/** The GraceTimer of a running server: a real timer (also the delivery calls' stop grace, DeliveryRuns.stop). */
export const realGraceTimer: GraceTimer = (ms, signal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/** Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^(attempt-1))]. */
export function backoffDelay(attempt: number, options: BackoffOptions = {}, random: () => number = Math.random): number {
  const base = options.baseMs ?? 1000;
  const cap = options.capMs ?? 3_600_000;
  const ceiling = Math.min(cap, base * 2 ** Math.min(Math.max(attempt - 1, 0), 40));
  return Math.floor(random() * ceiling);
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.stack ?? `${err.name}: ${err.message}`;
  try {
    return typeof err === 'string' ? err : JSON.stringify(err);
  } catch {
    return String(err);
  }
}

interface Registration {
  handler: JobHandler<unknown>;
  onFailed?: WorkOptions['onFailed'];
  /** Set for workBatch(): jobs are claimed and handled up to `size` at a time (`idleSize` while the API is not busy). */
  batch?: { handler: BatchJobHandler<unknown>; size: number; idleSize: number };
  concurrency: number;
  /** Runs (jobs, or batches) in progress. */
  running: number;
}

interface Running {
  job: ClaimedJob;
  done: Promise<void>;
  released: boolean;
}

const noopLogger: QueueLogger = { warn() {}, error() {} };

/**
 * Poll loop, per-name concurrency, lock heartbeat and graceful stop, shared by both engines.
 * One poll at a time; a nudge during a poll makes the loop go round again at once.
 */
export class JobRunner {
  private readonly handlers = new Map<string, Registration>();
  private readonly running = new Map<number, Running>();
  private launches = 0;
  private readonly logger: QueueLogger;
  private state: 'idle' | 'started' | 'stopping' | 'stopped' = 'idle';
  private polling: Promise<void> = Promise.resolve();
  private pollingNow = false;
  private pollAgain = false;
  /** Names to claim on the next pass: the ones nudged since the last, or every name. */
  private readonly dirty = new Set<string>();
  private dirtyAll = false;
  private pollTimer: NodeJS.Timeout | null = null;
  /** Spaces starts while the API in this process is busy; absent when nothing can make it busy. */
  private readonly gate: BusyGate | null;
  private heartbeatTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly backend: JobBackend,
    private readonly options: RunnerOptions,
  ) {
    this.logger = options.logger ?? noopLogger;
    const busy = options.busy;
    this.gate = busy ? new BusyGate(busy, options.busyShare ?? 0.1, (names) => names.forEach((name) => this.nudge(name))) : null;
  }

  /** Before start(), or after stop() to set the queue up again (a name then gets its new handler). */
  register<T>(name: string, handler: JobHandler<T>, options: WorkOptions = {}): void {
    if (this.state === 'started' || this.state === 'stopping') throw new Error(`queue: work('${name}') must be called before start()`);
    if (this.state === 'idle' && this.handlers.has(name)) throw new Error(`queue: a handler for '${name}' is already registered`);
    const concurrency = Math.max(1, Math.floor(options.concurrency ?? 1));
    this.handlers.set(name, { handler: handler as JobHandler<unknown>, onFailed: options.onFailed, concurrency, running: 0 });
  }

  /** register() for a batch handler (see BatchJobHandler). */
  registerBatch<T>(name: string, handler: BatchJobHandler<T>, options: BatchWorkOptions): void {
    const size = Math.max(1, Math.floor(options.batchSize));
    // The single-job handler is the batch handler with one item (the fallback after a batch threw).
    this.register<T>(
      name,
      async (data, job) => {
        const [failure] = await handler([{ data, job }]);
        if (failure !== undefined) throw asError(failure);
      },
      options,
    );
    const idleSize = Math.max(size, Math.floor(options.idleBatchSize ?? size));
    this.handlers.get(name)!.batch = { handler: handler as BatchJobHandler<unknown>, size, idleSize };
  }

  get names(): string[] {
    return [...this.handlers.keys()];
  }

  get isRunning(): boolean {
    return this.state === 'started';
  }

  /** Starts working; after stop() it starts again (a worker restart). */
  async start(): Promise<void> {
    if (this.state === 'started' || this.state === 'stopping') return;
    await this.backend.prepare?.(this.names);
    this.state = 'started';
    this.heartbeatTimer = setInterval(() => void this.beat(), this.options.heartbeatMs);
    this.nudge();
  }

  /**
   * Polls now (or right after the poll in progress) instead of waiting for the interval: only
   * the named queue when given (a job of that name was enqueued or finished), else every one.
   * Claiming only what may have changed keeps a busy process from issuing a claim per name on
   * every enqueue and completion.
   */
  nudge(name?: string): void {
    if (this.state !== 'started') return;
    if (name === undefined) this.dirtyAll = true;
    else this.dirty.add(name);
    if (this.pollingNow) {
      this.pollAgain = true;
      return;
    }
    // A nudge of one name leaves the timer of the poll of every name where it is: under steady
    // traffic (every send and completion nudges its name) it would otherwise be put off for as
    // long as the traffic lasts, and what only that poll finds (a job that came due, a name
    // nobody nudges, an expired lock) waited for the traffic to stop (a broadcast's next chunk
    // minutes late, a scheduled send 83 s late, measured under 30 sends a second).
    if (name === undefined && this.pollTimer) {
      clearTimeout(this.pollTimer);
      this.pollTimer = null;
    }
    this.pollingNow = true;
    this.polling = this.pollLoop();
  }

  private async pollLoop(): Promise<void> {
    try {
      do {
        this.pollAgain = false;
        const nudged = [...this.dirty];
        const everyName = this.dirtyAll;
        this.dirty.clear();
        this.dirtyAll = false;
        // Nudges during the look below set pollAgain: the loop comes back for them.
        const names = everyName ? await this.dueOrNudged(nudged) : nudged;
        for (const name of names) {
          const reg = this.handlers.get(name);
          if (!reg) continue;
          if (this.state !== 'started') return;
          const room = this.gate ? this.gate.room(name) : Number.POSITIVE_INFINITY;
          const free = Math.min(reg.concurrency - reg.running, room);
          if (free <= 0) continue;
          // Room is unbounded when the API is not busy (or this process serves none).
          const size = reg.batch ? (room === Number.POSITIVE_INFINITY ? reg.batch.idleSize : reg.batch.size) : 1;
          let jobs: ClaimedJob[] = [];
          try {
            jobs = await this.backend.claim(name, free * size);
          } catch (err) {
            this.logger.error({ err, queue: name }, 'queue: claiming jobs failed');
          }
          if (jobs.length === 0) continue;
          const ended = room === Number.POSITIVE_INFINITY ? null : this.gate!.started();
          const runs: Promise<void>[] = [];
          if (reg.batch) for (let i = 0; i < jobs.length; i += size) runs.push(this.launchBatch(reg, jobs.slice(i, i + size)));
          else for (const job of jobs) runs.push(this.launch(reg, job));
          if (ended) void Promise.all(runs).finally(ended);
        }
      } while (this.pollAgain && this.state === 'started');
    } finally {
      // Synchronous with the loop's end, so a nudge is either seen by the loop or starts a new one.
      this.pollingNow = false;
      if (this.state === 'started' && !this.pollTimer) {
        this.pollTimer = setTimeout(() => {
          this.pollTimer = null;
          this.nudge();
        }, this.options.pollIntervalMs);
      }
    }
  }

  /**
   * Every registered name worth a claim on a poll of all of them: the nudged ones (a job of theirs
   * was just enqueued or finished here) and those the backend says may have a job due.
   */
  private async dueOrNudged(nudged: string[]): Promise<string[]> {
    const all = [...this.handlers.keys()];
    if (!this.backend.dueNames) return all;
    const unsure = all.filter((name) => !nudged.includes(name));
    let due: Set<string>;
    try {
      due = await this.backend.dueNames(unsure);
    } catch (err) {
      this.logger.error({ err }, 'queue: looking for due jobs failed');
      due = new Set(unsure);
    }
    return all.filter((name) => due.has(name) || nudged.includes(name));
  }

  private launch(reg: Registration, job: ClaimedJob): Promise<void> {
    reg.running++;
    // Keyed per run, not per job: a released job may be claimed again here while its old
    // handler is still finishing.
    const key = ++this.launches;
    const entry: Running = { job, released: false, done: Promise.resolve() };
    let progressed = true;
    entry.done = this.execute(reg, entry)
      .then((ran) => {
        progressed = ran;
      })
      .finally(() => {
        reg.running--;
        this.running.delete(key);
        // A run that only deferred its job leaves the name to the next poll (see executeBatch).
        if (progressed) this.nudge(job.name);
      });
    this.running.set(key, entry);
    return entry.done;
  }

  /** Runs one job; false when its handler deferred it (DeferJobError), else true. */
  private async execute(reg: Registration, entry: Running): Promise<boolean> {
    // Let pending I/O (e.g. API requests in the same process) in before each job: on SQLite a
    // handler's queries run synchronously, so back-to-back jobs would otherwise starve the API.
    await new Promise((resolve) => setImmediate(resolve));
    const { job } = entry;
    if (job.attempt > job.maxAttempts) {
      // Taken over from a dead worker whose run used the last attempt.
      await this.failForGood(reg, job, 'worker lost (lock expired) on the last attempt');
      return true;
    }
    let failure: unknown;
    let ok = false;
    try {
      await reg.handler(job.data, { id: job.id, name: job.name, attempt: job.attempt, maxAttempts: job.maxAttempts });
      ok = true;
    } catch (err) {
      failure = err;
    }
    // Released on stop: the job is someone else's now, whatever the handler did.
    if (entry.released) return true;
    if (ok) {
      await this.settle(() => this.backend.complete(job), job);
      return true;
    }
    await this.recordFailure(reg, job, failure);
    return !isDeferral(failure);
  }

  /** A failed run: deferred (DeferJobError), failed for good (permanent, or the last attempt), else retried after a backoff. */
  private async recordFailure(reg: Registration, job: ClaimedJob, failure: unknown): Promise<void> {
    if (isDeferral(failure)) {
      const delayMs = Number.isFinite(failure.delayMs) && failure.delayMs > 0 ? failure.delayMs : 0;
      await this.settle(() => this.backend.defer(job, delayMs), job);
      return;
    }
    const message = errorMessage(failure);
    const permanent = failure instanceof PermanentJobError || (failure as Error | undefined)?.name === 'PermanentJobError';
    if (permanent || job.attempt >= job.maxAttempts) {
      this.logger.warn({ queue: job.name, jobId: job.id, attempt: job.attempt, err: failure }, 'queue: job failed');
      await this.failForGood(reg, job, message);
      return;
    }
    const requested = failure instanceof RetryJobError ? failure.delayMs : undefined;
    const delayMs =
      requested !== undefined && Number.isFinite(requested) && requested >= 0
        ? requested
        : backoffDelay(job.attempt, this.options.backoff, this.options.random);
    await this.settle(() => this.backend.retry(job, delayMs, message), job);
  }

  private launchBatch(reg: Registration, jobs: ClaimedJob[]): Promise<void> {
    reg.running++;
    const keys = jobs.map(() => ++this.launches);
    const entries: Running[] = jobs.map((job) => ({ job, released: false, done: Promise.resolve() }));
    let progressed = true;
    const done = this.executeBatch(reg, entries)
      .then((ran) => {
        progressed = ran;
      })
      .finally(() => {
        reg.running--;
        for (const key of keys) this.running.delete(key);
        if (progressed) this.nudge(jobs[0].name);
      });
    entries.forEach((entry, i) => {
      entry.done = done;
      this.running.set(keys[i], entry);
    });
    return done;
  }

  /**
   * Runs a batch; false when its handler deferred every job of it (DeferJobError), else true.
   * A run that only deferred made no progress: nudging its name again would claim the same
   * kind of jobs at once and defer them again, round and round while whatever they give way to
   * lasts (a slow tenant's render); the name waits for the next poll or nudge instead.
   */
  private async executeBatch(reg: Registration, entries: Running[]): Promise<boolean> {
    await new Promise((resolve) => setImmediate(resolve));
    const live: Running[] = [];
    for (const entry of entries) {
      const { job } = entry;
      if (job.attempt > job.maxAttempts) await this.failForGood(reg, job, 'worker lost (lock expired) on the last attempt');
      else live.push(entry);
    }
    if (live.length === 0) return true;
    const context = (job: ClaimedJob): JobContext => ({ id: job.id, name: job.name, attempt: job.attempt, maxAttempts: job.maxAttempts });
    let failures: unknown[];
    try {
      failures = await reg.batch!.handler(live.map(({ job }) => ({ data: job.data, job: context(job) })));
    } catch (err) {
      // The batch failed as a whole: run its jobs one by one, so one bad job fails alone.
      this.logger.warn({ err, queue: live[0].job.name, jobs: live.length }, 'queue: batch failed; running its jobs one by one');
      for (const entry of live) await this.execute(reg, entry);
      return true;
    }
    const completed: ClaimedJob[] = [];
    for (const [i, entry] of live.entries()) {
      // Released on stop: the job is someone else's now, whatever the handler did.
      if (entry.released) continue;
      if (failures[i] === undefined) completed.push(entry.job);
      else await this.recordFailure(reg, entry.job, failures[i]);
    }
    const onlyDeferred = live.length === entries.length && live.every((_, i) => isDeferral(failures[i]));
    if (completed.length === 0) return !onlyDeferred;
    const completeMany = this.backend.completeMany?.bind(this.backend);
    if (completeMany) await this.settle(() => completeMany(completed), completed[0]);
    else for (const job of completed) await this.settle(() => this.backend.complete(job), job);
    return true;
  }

  /**
   * The handler's onFailed first, then the queue's record: a crash in between runs the job again
   * (its handler sees the work already settled), never leaves the work waiting on a failed job.
   */
  private async failForGood(reg: Registration, job: ClaimedJob, error: string): Promise<void> {
    if (reg.onFailed) {
      try {
        await reg.onFailed(job.data, { id: job.id, name: job.name, attempt: job.attempt, maxAttempts: job.maxAttempts }, error);
      } catch (err) {
        this.logger.error({ err, queue: job.name, jobId: job.id }, 'queue: onFailed of a job that failed for good threw');
      }
    }
    await this.settle(() => this.backend.fail(job, error), job);
  }

  /** A lost status write is not fatal: the lock expires and the job runs again (at-least-once). */
  private async settle(write: () => Promise<void>, job: ClaimedJob): Promise<void> {
    try {
      await write();
    } catch (err) {
      this.logger.error({ err, queue: job.name, jobId: job.id }, 'queue: recording the job outcome failed');
    }
  }

  private async beat(): Promise<void> {
    const jobs = [...this.running.values()].filter((r) => !r.released).map((r) => r.job);
    if (jobs.length === 0) return;
    try {
      await this.backend.heartbeat(jobs);
    } catch (err) {
      this.logger.error({ err }, 'queue: lock heartbeat failed');
    }
  }

  /** Stops claiming, waits up to graceMs for running handlers, then releases what is left. */
  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    const wasStarted = this.state === 'started';
    this.state = 'stopping';
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = null;
    this.gate?.stop();
    if (wasStarted) {
      await this.polling;
      const all = Promise.allSettled([...this.running.values()].filter((r) => !r.released).map((r) => r.done));
      const graceOver = new AbortController();
      const grace = (this.options.graceTimer ?? realGraceTimer)(this.options.graceMs, graceOver.signal);
      await Promise.race([all, grace]);
      graceOver.abort();
      const left = [...this.running.values()].filter((r) => !r.released);
      if (left.length > 0) {
        for (const r of left) r.released = true;
        try {
          await this.backend.release(left.map((r) => r.job));
        } catch (err) {
          this.logger.error({ err }, 'queue: releasing unfinished jobs failed; they run again when their locks expire');
        }
      }
    }
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
    this.state = 'stopped';
  }
}

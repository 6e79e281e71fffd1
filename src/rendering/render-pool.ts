import os from 'node:os';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import type { Channel } from '../http/schemas.js';
import { IdleTimer, THREAD_IDLE_MS } from '../idle-timer.js';
import { contentWithoutTemplates } from './content.js';
import { type ComponentResolver, DEFAULT_LIMITS, type RenderContext, type RenderLimits, TemplateRenderError } from './liquid.js';

/** Pool -> render thread. */
export type FromPool =
  | { type: 'render'; id: number; channel: Channel; content: Record<string, unknown>; context: RenderContext; limits?: RenderLimits }
  | { type: 'components'; id: number; found?: Record<string, string>; error?: string };

/** Render thread -> pool. */
export type ToPool =
  | { type: 'ready' }
  | { type: 'components'; id: number; ids: string[] }
  | { type: 'done'; id: number; ok: true; content: Record<string, unknown> }
  | { type: 'done'; id: number; ok: false; renderError: boolean; message: string };

export interface RenderPoolOptions {
  /** Render threads. Default: one per CPU beyond the first (at least one, at most 4). */
  size?: number;
  /**
   * Wall time one render may take before its thread is terminated: the backstop for what
   * LiquidJS's own limits (checked between template nodes) cannot stop.
   */
  deadlineMs?: number;
  /** Heap of a render thread: a template that allocates more kills only its thread. */
  maxHeapMb?: number;
  /** How long a render thread stays without a job before it exits (default THREAD_IDLE_MS); the next render starts one again. */
  idleMs?: number;
}

interface Job {
  id: number;
  /** Whose render this is (an account id): waiting renders are taken round-robin between tenants. */
  tenant: string;
  channel: Channel;
  content: Record<string, unknown>;
  context: RenderContext;
  limits?: RenderLimits;
  resolveComponents?: ComponentResolver;
  resolve: (content: Record<string, unknown>) => void;
  reject: (err: Error) => void;
}

interface Thread {
  worker: Worker;
  /** Loaded and listening: a job's deadline runs from its dispatch, not from the thread's start. */
  ready: boolean;
  job: Job | null;
  timer: NodeJS.Timeout | null;
  /** Started when the thread is left without a job: it exits once idleMs pass so. */
  idle: IdleTimer;
}

/**
 * Renders channel content on worker threads, so a template that runs up to the render limits
 * (2 s of loops, or one huge filter) never blocks the event loop that serves the API and the
 * queue. Jobs wait for a free thread in order per tenant, tenants taking turns: one tenant's slow
 * renders queued from several routing batches do not make another's wait for all of them. A
 * thread past its deadline, or one that dies (out of memory), fails its job with
 * TemplateRenderError and is replaced.
 */
export class RenderPool {
  private readonly size: number;
  private readonly deadlineMs: number;
  private readonly maxHeapMb: number;
  private readonly idleMs: number;
  private readonly threads: Thread[] = [];
  /** Waiting jobs per tenant, in order; the tenants in the order of their turns (a Map keeps insertion order). */
  private readonly waiting = new Map<string, Job[]>();
  private nextId = 1;
  private closed = false;

  constructor(options: RenderPoolOptions = {}) {
    this.size = Math.max(1, options.size ?? Math.min(4, Math.max(1, os.availableParallelism() - 1)));
    this.deadlineMs = options.deadlineMs ?? DEFAULT_LIMITS.renderLimit + 1000;
    this.maxHeapMb = options.maxHeapMb ?? 256;
    this.idleMs = options.idleMs ?? THREAD_IDLE_MS;
  }

  /** Render threads running (started or starting). */
  get threadCount(): number {
    return this.threads.length;
  }

  /** The heap limits each running render thread was given (Worker.resourceLimits), in MB. */
  get threadLimits(): Worker['resourceLimits'][] {
    return this.threads.map((t) => t.worker.resourceLimits);
  }

  /**
   * renderChannelContent on a render thread; rejects with TemplateRenderError when the template
   * fails. `limits`: LiquidJS limits tighter than the process's defaults (the deadline stays the
   * pool's). `tenant`: whose render it is (the account), for the turns between tenants; renders
   * without one share a turn.
   */
  render<T extends object>(channel: Channel, content: T, context: RenderContext, options: { resolveComponents?: ComponentResolver; limits?: RenderLimits; tenant?: string } = {}): Promise<T> {
    if (this.closed) return Promise.reject(new Error('render pool is closed'));
    // Content without a `{` has nothing to run: its result is known without a thread (a round
    // trip to a render thread costs more than the rest of processing a plain message). Only for
    // data a thread could have been sent, so what fails on the way to a thread still fails.
    const plain = isPlainData(context, 0) ? contentWithoutTemplates(channel, content) : null;
    if (plain) return Promise.resolve(plain);
    return new Promise<T>((resolve, reject) => {
      this.enqueue({
        id: this.nextId++,
        tenant: options.tenant ?? '',
        channel,
        content: content as Record<string, unknown>,
        context,
        ...(options.limits ? { limits: options.limits } : {}),
        resolveComponents: options.resolveComponents,
        resolve: resolve as (c: Record<string, unknown>) => void,
        reject,
      });
      this.dispatch();
    });
  }

  /** Terminates the threads; queued and running jobs fail. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.takeAllWaiting()) job.reject(new Error('render pool is closed'));
    const threads = this.threads.splice(0);
    for (const thread of threads) {
      thread.idle.busy();
      this.finish(thread, new Error('render pool is closed'));
    }
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }

  private enqueue(job: Job): void {
    const jobs = this.waiting.get(job.tenant);
    if (jobs) jobs.push(job);
    else this.waiting.set(job.tenant, [job]);
  }

  /** The first waiting job of the tenant whose turn it is; that tenant's turn moves to the end. */
  private nextWaiting(): Job | undefined {
    const first = this.waiting.entries().next();
    if (first.done) return undefined;
    const [tenant, jobs] = first.value;
    const job = jobs.shift()!;
    this.waiting.delete(tenant);
    if (jobs.length > 0) this.waiting.set(tenant, jobs);
    return job;
  }

  private takeAllWaiting(): Job[] {
    const jobs = [...this.waiting.values()].flat();
    this.waiting.clear();
    return jobs;
  }

  private dispatch(): void {
    while (this.waiting.size > 0) {
      const thread = this.threads.find((t) => t.ready && t.job === null);
      if (!thread) {
        // Threads still starting take the queue when ready.
        if (this.threads.length < this.size && this.threads.every((t) => t.ready)) this.spawn();
        return;
      }
      const job = this.nextWaiting()!;
      thread.idle.busy();
      thread.job = job;
      thread.timer = setTimeout(() => this.kill(thread, new TemplateRenderError(`rendering took longer than ${this.deadlineMs} ms`)), this.deadlineMs);
      const msg: FromPool = { type: 'render', id: job.id, channel: job.channel, content: job.content, context: job.context, ...(job.limits ? { limits: job.limits } : {}) };
      try {
        thread.worker.postMessage(msg);
      } catch (err) {
        // Content that cannot be copied to the thread (not JSON-like): fails this job only.
        this.finish(thread, err instanceof Error ? err : new Error(String(err)));
      }
    }
    // Nothing waits: a ready thread left without a job starts counting towards its exit (one
    // already counting goes on, so a spare thread exits even while another one works).
    for (const thread of this.threads) if (thread.ready && thread.job === null && !thread.idle.counting) thread.idle.idle();
  }

  private spawn(): Thread {
    const worker = startWorker({ resourceLimits: { maxOldGenerationSizeMb: this.maxHeapMb, maxYoungGenerationSizeMb: RENDER_YOUNG_GENERATION_MB } });
    // Idle render threads do not keep the process alive.
    worker.unref();
    const thread: Thread = { worker, ready: false, job: null, timer: null, idle: new IdleTimer(this.idleMs, () => this.retire(thread)) };
    worker.on('message', (msg: ToPool) => this.onMessage(thread, msg));
    worker.on('error', (err) => this.kill(thread, new TemplateRenderError(`the render thread failed: ${err.message}`)));
    worker.on('exit', () => this.kill(thread, new TemplateRenderError('the render thread stopped (out of memory?)')));
    this.threads.push(thread);
    return thread;
  }

  private onMessage(thread: Thread, msg: ToPool): void {
    if (msg.type === 'ready') {
      thread.ready = true;
      this.dispatch();
      return;
    }
    const job = thread.job;
    if (!job || msg.id !== job.id) return;
    if (msg.type === 'components') {
      const reply = (answer: Omit<Extract<FromPool, { type: 'components' }>, 'type' | 'id'>) => {
        if (thread.job === job) thread.worker.postMessage({ type: 'components', id: job.id, ...answer } satisfies FromPool);
      };
      if (!job.resolveComponents) reply({ error: `uses components (${msg.ids.join(', ')}) but no component source was given` });
      else
        job
          .resolveComponents(msg.ids)
          .then((found) => reply({ found: found instanceof Map ? Object.fromEntries(found) : found }))
          .catch((err: unknown) => reply({ error: err instanceof Error ? err.message : String(err) }));
      return;
    }
    this.finish(thread, msg.ok ? null : msg.renderError ? new TemplateRenderError(msg.message) : new Error(msg.message), msg.ok ? msg.content : undefined);
    this.dispatch();
  }

  /** Ends the thread's current job (with `error`, else with `content`). */
  private finish(thread: Thread, error: Error | null, content?: Record<string, unknown>): void {
    const job = thread.job;
    if (thread.timer) clearTimeout(thread.timer);
    thread.timer = null;
    thread.job = null;
    if (!job) return;
    if (error) job.reject(error);
    else job.resolve(content!);
  }

  /** A thread idle for idleMs exits; its 'exit' finds it no longer in the pool. */
  private retire(thread: Thread): void {
    const index = this.threads.indexOf(thread);
    if (index < 0 || thread.job !== null) return;
    this.threads.splice(index, 1);
    void thread.worker.terminate();
  }

  /** Fails the thread's job, removes the thread and starts what waits on a new one. */
  private kill(thread: Thread, error: Error): void {
    const index = this.threads.indexOf(thread);
    if (index < 0) return;
    this.threads.splice(index, 1);
    thread.idle.busy();
    this.finish(thread, error);
    void thread.worker.terminate();
    if (!thread.ready) {
      // A thread that cannot even start would fail again: fail what waits (the jobs are retried) instead of looping.
      for (const job of this.takeAllWaiting()) job.reject(new Error(`the render thread could not start: ${error.message}`));
      return;
    }
    if (!this.closed) this.dispatch();
  }
}

/**
 * A render thread's young generation, in MB. By default V8 lets it grow with the thread's work:
 * measured on the broadcast bench (100,000 mails, one render thread), the thread's young
 * generation went from 8 MB after 10,000 mails to 28 MB by the end (its whole heap 5 -> 38 MB),
 * some 25 MB of the process's peak. A render is one template at a time, so nearly all it
 * allocates is dead by the next young collection, and a small young generation costs about
 * nothing (as the MIME thread's: mime-builder.ts). See docs/memory.md.
 */
export const RENDER_YOUNG_GENERATION_MB = 4;

const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER_URL = new URL(`./render-worker${FROM_SOURCE ? '.ts' : '.js'}`, import.meta.url);

/** The thread's entry: the built file, or from source (tsx, vitest) the .ts file through tsx's loader. */
function startWorker(options: WorkerOptions): Worker {
  if (!FROM_SOURCE) return new Worker(WORKER_URL, options);
  // Loader hooks of the parent are not inherited by worker threads on Node 20: register tsx in the thread.
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(WORKER_URL.href)}); })`;
  return new Worker(boot, { ...options, eval: true });
}

/** JSON-like data (what render contexts are): no functions or symbols, not nested past 50 levels. */
function isPlainData(value: unknown, depth: number): boolean {
  if (typeof value === 'function' || typeof value === 'symbol') return false;
  if (value === null || typeof value !== 'object') return true;
  if (depth > 50) return false;
  const values = Array.isArray(value) ? value : Object.values(value);
  return values.every((v) => isPlainData(v, depth + 1));
}

import { Worker } from 'node:worker_threads';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { IdleTimer, THREAD_IDLE_MS } from '../../idle-timer.js';
import type { EmailDkimKey } from '../types.js';
import { DkimSigner } from './dkim.js';

/** A message built for SMTP: its envelope and its bytes. */
export interface BuiltMime {
  envelope: { from: string; to: string[] };
  raw: Buffer;
}

/** Main thread -> MIME thread. */
export interface FromBuilder {
  id: number;
  options: Mail.Options;
  /** Sign the built message with this key. */
  dkim?: EmailDkimKey;
}

/** MIME thread -> main thread. */
export type ToBuilder =
  | { id: 0; ready: true }
  | { id: number; ok: true; envelope: BuiltMime['envelope']; raw: ArrayBuffer }
  | { id: number; ok: false; message: string; code?: string };

/**
 * Builds a message with nodemailer's MailComposer, DKIM-signed when a key is given (on the calling
 * thread; the MIME thread runs the same). `signer`: one that keeps its parsed keys across calls.
 */
export async function buildMime(options: Mail.Options, dkim?: EmailDkimKey, signer: DkimSigner = new DkimSigner()): Promise<BuiltMime> {
  return signMime(await composeMime(options), dkim, signer);
}

/** A composed message, DKIM-signed when a key is given. */
export async function signMime(built: BuiltMime, dkim: EmailDkimKey | undefined, signer: DkimSigner): Promise<BuiltMime> {
  return dkim ? { envelope: built.envelope, raw: await signer.sign(built.raw, dkim) } : built;
}

/** The message as MailComposer builds it, unsigned. */
export async function composeMime(options: Mail.Options): Promise<BuiltMime> {
  const mime = new MailComposer(options).compile();
  const envelope = mime.getEnvelope();
  return { envelope: { from: envelope.from || '', to: envelope.to }, raw: await mime.build() };
}

/**
 * Builds MIME messages (nodemailer's MailComposer, the same bytes) on a thread of its own, off
 * the event loop that runs the queue, the ledger and the SMTP connections. Measured reason:
 * building a message (its MIME tree streamed into a buffer) is about 200 µs of CPU, a fifth of
 * the worker's main thread per mail in the email benchmark; handing it to a thread costs the
 * main thread a message each way. While the thread starts, and should it fail, messages are
 * built on the calling thread instead: nothing waits for the thread.
 */
export class MimeBuilder {
  private worker: Worker | null = null;
  /** Lets the thread go once nothing was built on it for a while (IdleTimer); the next build starts it again. */
  private readonly idleTimer: IdleTimer;
  private ready = false;
  private nextId = 1;
  private readonly pending = new Map<number, { options: Mail.Options; dkim?: EmailDkimKey; resolve: (built: BuiltMime) => void; reject: (err: Error) => void }>();
  /** Signs what is built on the calling thread. */
  private readonly signer = new DkimSigner();
  private closed = false;
  /** The thread exited before it was ready: it would again, so the calling thread builds from then on. */
  private cannotStart = false;
  /** Settles when the thread is ready (true) or could not start (false). */
  private readiness: { promise: Promise<boolean>; settle: (ready: boolean) => void } | null = null;

  /** `idleMs`: how long the thread stays without a message to build before it exits (default THREAD_IDLE_MS). */
  constructor(options: { idleMs?: number } = {}) {
    this.idleTimer = new IdleTimer(options.idleMs ?? THREAD_IDLE_MS, () => this.retire());
  }

  /** Whether the MIME thread runs (started, or starting). */
  get threadRunning(): boolean {
    return this.worker !== null;
  }

  /** Starts the thread if it is not running; resolves true once it takes messages, false if it cannot start. */
  whenReady(): Promise<boolean> {
    if (this.ready) return Promise.resolve(true);
    if (this.closed || this.cannotStart) return Promise.resolve(false);
    if (!this.worker) this.start();
    return this.readiness!.promise;
  }

  /** Builds (and with `dkim`, signs) a message on the MIME thread; signing there keeps its RSA work off the event loop too. */
  build(options: Mail.Options, dkim?: EmailDkimKey): Promise<BuiltMime> {
    if (!this.closed && !this.cannotStart && !this.worker) this.start();
    if (!this.ready || !this.worker) return buildMime(options, dkim, this.signer);
    const worker = this.worker;
    this.idleTimer.busy();
    return new Promise<BuiltMime>((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { options, dkim, resolve, reject });
      try {
        worker.postMessage({ id, options, ...(dkim ? { dkim } : {}) } satisfies FromBuilder);
      } catch {
        // Options a thread cannot be sent (not plain data): built here.
        this.pending.delete(id);
        if (this.pending.size === 0) this.idleTimer.idle();
        buildMime(options, dkim, this.signer).then(resolve, reject);
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.idleTimer.busy();
    const worker = this.worker;
    this.readiness?.settle(false);
    this.stopped();
    await worker?.terminate();
  }

  private start(): void {
    const worker = startWorker();
    // An idle MIME thread does not keep the process alive.
    worker.unref();
    this.worker = worker;
    let settle!: (ready: boolean) => void;
    const promise = new Promise<boolean>((resolve) => (settle = resolve));
    this.readiness = { promise, settle };
    worker.on('message', (msg: ToBuilder) => {
      if ('ready' in msg) {
        this.ready = true;
        settle(true);
        // Started by a build that then ran here: with nothing sent to it, the count starts now.
        if (this.pending.size === 0) this.idleTimer.idle();
        return;
      }
      const job = this.pending.get(msg.id);
      if (!job) return;
      this.pending.delete(msg.id);
      if (this.pending.size === 0) this.idleTimer.idle();
      if (msg.ok) job.resolve({ envelope: msg.envelope, raw: Buffer.from(msg.raw) });
      else job.reject(Object.assign(new Error(msg.message), msg.code ? { code: msg.code } : {}));
    });
    const failed = () => {
      if (this.worker !== worker) return;
      if (!this.ready) this.cannotStart = true;
      settle(false);
      this.stopped();
      // Started again on the next build; meanwhile the calling thread builds.
    };
    worker.on('error', failed);
    worker.on('exit', failed);
  }

  /** Idle for idleMs: the thread exits (its 'exit' is no failure: it is no longer this.worker). */
  private retire(): void {
    const worker = this.worker;
    if (!worker || this.pending.size > 0) return;
    this.worker = null;
    this.ready = false;
    this.readiness = null;
    void worker.terminate();
  }

  /** Forgets the thread; what it was building is built here. */
  private stopped(): void {
    this.worker = null;
    this.ready = false;
    const jobs = [...this.pending.values()];
    this.pending.clear();
    for (const job of jobs) buildMime(job.options, job.dkim, this.signer).then(job.resolve, job.reject);
  }
}

const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER_URL = new URL(`./mime-worker${FROM_SOURCE ? '.ts' : '.js'}`, import.meta.url);

/**
 * The MIME thread's young generation, in MB (by default V8 lets it grow until the thread's heap
 * held some 48 MB under load: docs/memory.md). Its mails are built one at a time
 * (mime-worker.ts), so nearly all it allocates is dead by its next young collection, and a small
 * one costs about nothing: measured (bench broadcast, 10,000 DKIM-signed mails) the process
 * peaked at 254-261 MB against 274-275 with the default, at the same rate and CPU per mail; 4 MB
 * saved no more (251-256).
 */
const MIME_YOUNG_GENERATION_MB = 8;

/** The thread's entry: the built file, or from source (tsx, vitest) the .ts file through tsx's loader (as the render pool's). */
function startWorker(): Worker {
  const resourceLimits = { maxYoungGenerationSizeMb: MIME_YOUNG_GENERATION_MB };
  if (!FROM_SOURCE) return new Worker(WORKER_URL, { resourceLimits });
  const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(WORKER_URL.href)}); })`;
  return new Worker(boot, { eval: true, resourceLimits });
}

import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock, Ids } from '../../clock.js';
import type { DeliveryLedger } from '../delivery/ledger.js';
import type { Secrets } from '../../secrets.js';
import { type DispatchRoom, dispatchStep } from './dispatch.js';
import type { WebhookOutbox } from './outbox.js';
import { type Outcome, OutcomeRecorder } from './attempt-outcomes.js';
import { signatureHeaders } from './signing.js';
import { SigningKeyCache } from './signing-key-cache.js';
import type { PostResult, WebhookSender } from './webhook-sender.js';
import type { ClaimedDelivery, WebhooksRepository } from './webhooks.repository.js';
import { storableText } from '../../characters.js';

/** Outcomes recorded per transaction at most before a flush goes at once. */
const FLUSH_BATCH = 64;
const FLUSH_DELAY_MS = 2;

export interface WebhookWorkerOptions {
  /** How often ledger events and due retries are looked for when nothing nudged the worker. */
  pollMs: number;
  /** Requests in flight in this process, all endpoints together. */
  concurrency: number;
  /** Requests in flight to one endpoint in this process: a slow endpoint holds at most this many. */
  perEndpoint: number;
  /** A claimed delivery is due again after this long if its worker never reports (crash). */
  leaseMs: number;
  /** Ledger events read per dispatch transaction. */
  dispatchBatch?: number;
  random?: () => number;
}

/** A committed claim: its lease and the deliveries this worker posts; `more` when it filled the room (more may be due). */
interface Taken {
  lease: string;
  claims: ClaimedDelivery[];
  more: boolean;
  /** Environments whose ledger events were all dispatched. */
  dispatched: { env_id: string; last_id: number }[];
}

/**
 * Delivers webhooks. Each tick dispatches new ledger events (delivery_events past each
 * environment's cursor) into webhook events and deliveries, then claims due deliveries and
 * posts them. The deliveries table is the queue (see migration 0070): a claim moves the row's
 * due time past a lease, so a worker killed mid-request loses nothing (the row is due again when
 * the lease ends, with the same event id), and due times are compared with the injected clock on
 * both engines, so tests drive the retry schedule with a manual clock.
 *
 * Why not a job per delivery on the Queue port: pg-boss compares run times with the server's
 * clock, and a job per attempt costs a claim, a completion and the handler's own reads; claiming
 * and settling deliveries in batches keeps the rate close to a bare HTTP client (bench
 * `webhooks`). Fairness: at most `perEndpoint` requests per endpoint are in flight here, and a
 * claim skips endpoints at that limit, so a hanging endpoint (15 s per request) holds at most
 * perEndpoint of the `concurrency` slots and never the others' turns.
 */
export class WebhookWorker {
  private readonly inflight = new Map<string, number>();
  private active = 0;
  private outcomes: Outcome[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private claiming = false;
  private claimAgain = false;
  /** Environments with ledger events not dispatched yet (found by a tick, or left for want of room). */
  private readonly backlog = new Map<string, { env_id: string; last_id: number }>();
  /**
   * Due deliveries may be waiting (retries come due, replays, expired leases, deliveries written
   * due): set by each tick (the poll, a nudge) and by deliveries left due here; cleared by a
   * claim that found fewer than it had room for. The flushes in between skip the claim's SELECT.
   */
  private dueMayWait = true;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> = Promise.resolve();
  /** Polling on its own timer (start() until stop()). */
  private running = false;
  private stopped = false;
  private readonly posts = new Set<Promise<void>>();
  private readonly signingKeys: SigningKeyCache;
  private readonly recorder: OutcomeRecorder;
  private attemptsMade = 0;

  constructor(
    private readonly deps: { clock: Clock; ids: Ids; logger: Logger; secrets: Secrets; ledger: Pick<DeliveryLedger, 'session'> },
    private readonly repo: WebhooksRepository,
    private readonly outbox: WebhookOutbox,
    private readonly sender: WebhookSender,
    private readonly options: WebhookWorkerOptions,
  ) {
    this.signingKeys = new SigningKeyCache(deps.secrets);
    this.recorder = new OutcomeRecorder(deps, options.random ?? Math.random);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.stopped = false;
    this.schedule(0);
  }

  /**
   * One pass by hand (tests drive the retry schedule with a manual clock this way): dispatch,
   * claim what is due, wait for those requests and record them. Returns the attempts made.
   */
  async runOnce(): Promise<number> {
    const before = this.attemptsMade;
    await this.findNewEvents();
    this.dueMayWait = true;
    await this.claim();
    await Promise.allSettled([...this.posts]);
    await this.flushing;
    await this.flush();
    return this.attemptsMade - before;
  }

  /** Stops claiming, waits for the requests in flight and records them. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.ticking;
    await Promise.allSettled([...this.posts]);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    await this.flushing;
    await this.flush();
  }

  /** Looks for work now (after a send, in tests, after a replay). */
  nudge(): void {
    if (!this.running) return;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.ticking = this.tick().finally(() => {
        if (this.running && !this.timer) this.schedule(this.options.pollMs);
      });
    }, ms);
  }

  private async tick(): Promise<void> {
    try {
      await this.findNewEvents();
      this.dueMayWait = true;
      await this.claim();
    } catch (err) {
      this.deps.logger.error({ err }, 'webhooks: worker tick failed');
    }
  }

  /** Environments whose ledger events went past what webhooks consumed: dispatched by the next claims. */
  private async findNewEvents(): Promise<void> {
    for (const env of await this.repo.envsWithNewEvents()) this.backlog.set(env.env_id, env);
  }

  /**
   * Takes work while there is room, each time in one transaction (takeIn): due deliveries, then
   * new ledger events; and posts it.
   */
  async claim(): Promise<void> {
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = true;
    try {
      do {
        this.claimAgain = false;
        for (;;) {
          const taken = await this.repo.transaction((repo) => this.takeIn(repo));
          this.launchAll(taken);
          if (!taken.more) break;
        }
      } while (this.claimAgain && !this.stopped);
    } finally {
      this.claiming = false;
    }
  }

  /**
   * In the caller's transaction (with the claiming flag held): claims due deliveries (claimIn),
   * then, with the room left, dispatches the environments' new ledger events (dispatchStep) and
   * takes at once the new deliveries there is room for: they are written leased to this worker
   * as a claim would lease them, so the first attempt of a delivery costs no claim (its SELECT
   * of the delivery, event and endpoint and its UPDATE). While the endpoints have no room, the
   * ledger events wait unread (committed: nothing is lost) and a later flush dispatches them, so
   * deliveries are made about as fast as they are posted. Nothing is reserved here: launchAll()
   * takes the slots once this is committed (a rolled-back transaction holds none).
   */
  private async takeIn(repo: WebhooksRepository): Promise<Taken> {
    const now = this.deps.clock.now();
    const until = new Date(now.getTime() + this.options.leaseMs).toISOString();
    const taken = await this.claimIn(repo, randomUUID(), now, until);
    if (taken.more || this.backlog.size === 0) return taken;
    const room = this.roomAfter(taken.claims);
    for (const env of [...this.backlog.values()]) {
      const step = await dispatchStep(repo, this.outbox, env, room, { lease: taken.lease, until, limit: this.options.dispatchBatch ?? 500 });
      if (step.more) taken.more = true;
      else if (!step.backlog) taken.dispatched.push(env);
    }
    return taken;
  }

  /** The room a dispatch has once `claimed` (not yet launched) take their slots. */
  private roomAfter(claimed: ClaimedDelivery[]): DispatchRoom {
    const taking = new Map<string, number>();
    for (const c of claimed) taking.set(c.endpoint_id, (taking.get(c.endpoint_id) ?? 0) + 1);
    const inflight = (endpointId: string) => (this.inflight.get(endpointId) ?? 0) + (taking.get(endpointId) ?? 0);
    const { concurrency, perEndpoint } = this.options;
    return {
      budget: (endpoints) => {
        if (this.stopped) return 0;
        let free = 0;
        for (const e of endpoints) free += Math.max(0, perEndpoint - inflight(e.id));
        const busy = this.active + claimed.length;
        const budget = Math.min(free, concurrency - busy);
        // One dispatch per few freed slots, not per slot (as room() does for claims).
        const worth = Math.max(1, Math.floor(Math.min(concurrency, endpoints.length * perEndpoint) / 4));
        return busy > 0 && budget < worth ? 0 : Math.max(0, budget);
      },
      take: (delivery) => {
        if (this.stopped || this.active + claimed.length >= concurrency || inflight(delivery.endpoint_id) >= perEndpoint) {
          // Written due: a later claim posts it.
          this.dueMayWait = true;
          return false;
        }
        taking.set(delivery.endpoint_id, (taking.get(delivery.endpoint_id) ?? 0) + 1);
        claimed.push(delivery);
        return true;
      },
    };
  }

  /** Free slots worth a claim now: none while most are busy (one claim per few deliveries, not per delivery). */
  private room(): number {
    if (this.stopped) return 0;
    const free = this.options.concurrency - this.active;
    if (free <= 0 || (this.active > 0 && free < Math.max(1, Math.floor(this.options.concurrency / 4)))) return 0;
    return free;
  }

  /**
   * In the caller's transaction: claims up to room() due deliveries under `lease` until `until`,
   * and gives back those over their endpoint's limit.
   */
  private async claimIn(repo: WebhooksRepository, lease: string, now: Date, until: string): Promise<Taken> {
    const free = this.room();
    if (free === 0 || !this.dueMayWait) return { lease, claims: [], more: false, dispatched: [] };
    const full = [...this.inflight].filter(([, n]) => n >= this.options.perEndpoint).map(([id]) => id);
    const claimed = await repo.claimDue(now.toISOString(), free, full, lease, until);
    const claims: ClaimedDelivery[] = [];
    const over: string[] = [];
    const taking = new Map<string, number>();
    for (const claim of claimed) {
      const n = (this.inflight.get(claim.endpoint_id) ?? 0) + (taking.get(claim.endpoint_id) ?? 0);
      if (n >= this.options.perEndpoint) over.push(claim.id);
      else {
        taking.set(claim.endpoint_id, (taking.get(claim.endpoint_id) ?? 0) + 1);
        claims.push(claim);
      }
    }
    // More of one endpoint than it may have in flight: back to due, not attempted.
    if (over.length > 0) await repo.release(over, lease, now.toISOString());
    this.dueMayWait = claimed.length === free || over.length > 0;
    return { lease, claims, more: claimed.length > 0 && claimed.length === free, dispatched: [] };
  }

  /** Takes the slots of a committed claim and posts its deliveries. */
  private launchAll(taken: Taken): void {
    // Unless a tick found newer events of it meanwhile.
    for (const env of taken.dispatched) if (this.backlog.get(env.env_id) === env) this.backlog.delete(env.env_id);
    for (const claim of taken.claims) {
      this.inflight.set(claim.endpoint_id, (this.inflight.get(claim.endpoint_id) ?? 0) + 1);
      this.active++;
      this.attemptsMade++;
      this.launch(claim, taken.lease);
    }
  }

  private launch(claim: ClaimedDelivery, lease: string): void {
    const post = this.attempt(claim, lease).finally(() => this.posts.delete(post));
    this.posts.add(post);
  }

  private async attempt(claim: ClaimedDelivery, lease: string): Promise<void> {
    const at = this.deps.clock.now();
    let result: PostResult;
    try {
      const keys = this.signingKeys.keysFor(claim, at.getTime());
      result = await this.sender.post(claim.url, signatureHeaders(keys, claim.event_id, at.getTime(), claim.payload), claim.payload, claim.endpoint_id);
    } catch (err) {
      result = { statusCode: null, headers: {}, body: '', durationMs: 0, error: storableText(`INTERNAL: ${(err as Error).message}`) };
    }
    const n = (this.inflight.get(claim.endpoint_id) ?? 1) - 1;
    if (n <= 0) this.inflight.delete(claim.endpoint_id);
    else this.inflight.set(claim.endpoint_id, n);
    this.active--;
    this.outcomes.push({ claim, lease, at, result });
    this.scheduleFlush();
  }

  /**
   * Outcomes are recorded in batches: at once when FLUSH_BATCH are waiting or nothing else is in
   * flight, else within FLUSH_DELAY_MS. Per-outcome transactions cost about half the
   * process's CPU per delivery in the bench (a transaction, an attempt INSERT and a claim each).
   */
  private scheduleFlush(): void {
    const now = this.outcomes.length >= FLUSH_BATCH || this.active === 0;
    if (this.flushTimer && !now) return;
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = setTimeout(
      () => {
        this.flushTimer = null;
        this.flushing = this.flushing.then(() => this.flush());
      },
      now ? 0 : FLUSH_DELAY_MS,
    );
  }

  /**
   * Records the outcomes gathered so far and, in the same transaction, claims deliveries for the
   * slots they freed: one transaction and one commit per cycle instead of two (a commit writes
   * every page the cycle dirtied, and the record and the claim dirty the same delivery pages).
   */
  async flush(): Promise<void> {
    const batch = this.outcomes;
    if (batch.length === 0) return;
    this.outcomes = [];
    const claimToo = this.running && !this.claiming;
    if (claimToo) this.claiming = true;
    let taken: Taken | null = null;
    try {
      taken = await this.repo.transaction(async (repo) => {
        await this.recorder.record(repo, batch);
        return claimToo ? this.takeIn(repo) : null;
      });
    } catch (err) {
      this.deps.logger.error({ err, outcomes: batch.length }, 'webhooks: recording attempts failed');
      if (claimToo) {
        // The claim may be what failed: record alone, so that no attempt goes unrecorded for it.
        await this.repo.transaction((repo) => this.recorder.record(repo, batch)).catch((again: unknown) => {
          // Their leases run out and they are attempted again (at-least-once).
          this.deps.logger.error({ err: again, outcomes: batch.length }, 'webhooks: recording attempts failed');
        });
      }
    } finally {
      if (claimToo) this.claiming = false;
    }
    if (taken) this.launchAll(taken);
    if (this.running && (!claimToo || !taken || taken.more || this.claimAgain)) this.claimInBackground();
  }

  /**
   * claim() that nobody awaits: a failure (SQLITE_BUSY from another process, a dropped
   * PostgreSQL connection) is logged, not an unhandled rejection that ends the process; what it
   * would have claimed stays due, and the next tick claims it.
   */
  private claimInBackground(): void {
    this.claim().catch((err: unknown) => {
      this.dueMayWait = true;
      this.deps.logger.error({ err }, 'webhooks: claiming deliveries failed');
    });
  }
}

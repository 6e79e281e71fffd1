import { Agent, type Dispatcher } from 'undici';
import { storableText } from '../../characters.js';
import { type HostLookup, SafeFetchError, resolvePublicAddress, toFetchError } from '../../net/ssrf.js';

/** What one POST to an endpoint gave. */
export interface PostResult {
  /** Null when no response arrived (blocked address, DNS, connection refused, timeout). */
  statusCode: number | null;
  headers: Record<string, string | string[] | undefined>;
  /** The first 4 KB of the response body. */
  body: string;
  durationMs: number;
  /** Why there is no response (SafeFetchError code and message). */
  error?: string;
}

export interface WebhookSenderOptions {
  /**
   * The whole exchange, from resolving the host to the last byte (the issue: a 2xx within 15 s
   * is success). A status that came in time is the answer, its body cut at this deadline.
   */
  timeoutMs: number;
  allowPrivateNetworks: boolean;
  /** Addresses let through even with the guard on (tests and benches aim at loopback). */
  allowAddresses?: string[];
  lookup?: HostLookup;
  /** Connections per endpoint: the per-endpoint concurrency, so that no request waits inside the pool. */
  connectionsPerEndpoint: number;
  /** How long a resolved and checked address is reused before DNS is asked again. */
  dnsTtlMs?: number;
}

const RESPONSE_KEPT_BYTES = 4096;
/** Read past the kept part so the connection can be reused; beyond this it is closed instead. */
const RESPONSE_DRAIN_BYTES = 64 * 1024;
const MAX_POOLS = 1000;
const MAX_TARGETS = 10_000;

type Answer = Omit<PostResult, 'durationMs' | 'error'>;

/** What the deadline reports when no status came in time (toFetchError reads it as TIMEOUT). */
class DeadlineError extends Error {
  override name = 'TimeoutError';
}

/**
 * One request, from its start to its answer, as undici's dispatch handler: the status, the
 * headers and the first 4 KB of the body, read on to 64 KB so the connection can be reused and
 * closed past that. A response body stream, as request() makes, cost about 10 µs CPU per
 * delivery more (bench webhooks: the stream, its listeners and the top-level URL parsing).
 *
 * The status is the answer (a 2xx is success): once it has come, whatever ends the body (its
 * end, the 64 KB cut, the deadline, a closed connection) answers that status with the body read
 * so far. At the deadline the request is aborted, which closes its connection, so a body that
 * never ends holds neither the attempt nor one of the endpoint's connections past the timeout.
 */
class Exchange implements Dispatcher.DispatchHandler {
  readonly answer: Promise<Answer>;
  /** The final status; 0 until it comes (1xx informational answers are not one). */
  private statusCode = 0;
  private headers: PostResult['headers'] = {};
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private read = 0;
  private controller: Dispatcher.DispatchController | null = null;
  /** Answered, failed or abandoned: what undici reports after that changes nothing. */
  private settled = false;
  private resolve!: (answer: Answer) => void;
  private reject!: (err: unknown) => void;

  constructor(
    private readonly deadlines: Deadlines,
    /** performance.now() by which it ends. */
    readonly deadline: number,
  ) {
    this.answer = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    deadlines.add(this);
  }

  /** The deadline passed: the status if it came, else a timeout; the request goes. */
  expire(): void {
    if (this.settled) return;
    if (this.statusCode > 0) this.succeed();
    else this.fail(new DeadlineError());
    // Not connected yet: onRequestStart aborts it before it is written.
    this.controller?.abort(new Error('webhook request past its deadline'));
  }

  /** Ended before its request was made (no address): nothing to answer, nothing to abort. */
  abandon(): void {
    this.settle();
  }

  /** Answered, failed or abandoned already. */
  get ended(): boolean {
    return this.settled;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Connected after the deadline (or after the attempt was abandoned): the request is not sent.
    if (this.settled) controller.abort(new Error('webhook request past its deadline'));
    else this.controller = controller;
  }

  onResponseStart(_controller: Dispatcher.DispatchController, status: number, headers: PostResult['headers']): void {
    // 1xx informational answers (102, 103) come before the final one.
    if (status < 200) return;
    this.statusCode = status;
    this.headers = headers;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.read += chunk.length;
    if (this.keptBytes < RESPONSE_KEPT_BYTES) {
      const part = chunk.subarray(0, RESPONSE_KEPT_BYTES - this.keptBytes);
      this.kept.push(part);
      this.keptBytes += part.length;
    }
    if (this.read > RESPONSE_DRAIN_BYTES && !this.settled) {
      this.succeed();
      controller.abort(new Error('response body over the drain limit'));
    }
  }

  onResponseEnd(): void {
    if (!this.settled) this.succeed();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    if (this.settled) return;
    if (this.statusCode > 0) this.succeed();
    else this.fail(err);
  }

  private succeed(): void {
    this.settle();
    const body = this.keptBytes === 0 ? '' : storableText(Buffer.concat(this.kept, this.keptBytes).toString('utf8'));
    this.resolve({ statusCode: this.statusCode, headers: this.headers, body });
  }

  private fail(err: unknown): void {
    this.settle();
    this.reject(err);
  }

  private settle(): void {
    this.settled = true;
    this.deadlines.delete(this);
  }
}

/**
 * The deadlines of a sender's requests in flight, with one timer for all of them: a timer or an
 * AbortSignal.timeout per request cost ~4% of the worker's CPU per delivery (bench webhooks).
 * Every request has the same timeout, so the order they start in is the order their deadlines
 * come in: the timer waits for the oldest one, ends what is due and waits for the next.
 */
class Deadlines {
  /** In insertion order, so by deadline. */
  private readonly pending = new Set<Exchange>();
  private timer: NodeJS.Timeout | null = null;

  add(exchange: Exchange): void {
    this.pending.add(exchange);
    // A timer already set fires at or before this deadline (an older one's).
    if (this.timer === null) this.arm(exchange.deadline);
  }

  delete(exchange: Exchange): void {
    this.pending.delete(exchange);
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(deadline: number): void {
    this.timer = setTimeout(() => this.expireDue(), Math.max(1, Math.ceil(deadline - performance.now())));
    // Requests in flight keep the process alive on their own; the timer need not.
    this.timer.unref();
  }

  private expireDue(): void {
    this.timer = null;
    const now = performance.now();
    for (const exchange of this.pending) {
      if (exchange.deadline > now) {
        this.arm(exchange.deadline);
        return;
      }
      this.pending.delete(exchange);
      exchange.expire();
    }
  }
}

/** A parsed endpoint URL: where its requests go. */
interface Target {
  href: string;
  origin: string;
  hostname: string;
  /** Path and query, as sent. */
  path: string;
}

interface Pool {
  /** The endpoint URL's origin (an endpoint's URL can change). */
  origin: string;
  address: string;
  family: 4 | 6;
  agent: Agent;
  checkedAt: number;
}

/**
 * Posts webhook bodies under the SSRF guard: the endpoint's host is resolved, every address it
 * has is checked (ssrf.ts), and the connection goes to the checked address only (the agent's
 * lookup answers that address, whatever DNS says later). Redirects are not followed: a 3xx is
 * the endpoint's answer, and a failure. A keep-alive pool per endpoint at its checked address,
 * so a busy endpoint does not pay a handshake per event; a pool's address is re-resolved and
 * re-checked after dnsTtlMs. Per endpoint, not per origin: endpoints on one host sharing
 * connections would let a hanging one hold another's (its requests queued in the pool, spending
 * their timeout there).
 */
export class WebhookSender {
  private readonly pools = new Map<string, Pool>();
  private readonly targets = new Map<string, Target>();
  private readonly dnsTtlMs: number;
  private readonly deadlines = new Deadlines();

  constructor(private readonly options: WebhookSenderOptions) {
    this.dnsTtlMs = options.dnsTtlMs ?? 60_000;
  }

  /** `poolKey` names the endpoint whose connections the request takes (its id; the URL by default). */
  async post(rawUrl: string, headers: Record<string, string>, body: string, poolKey = rawUrl): Promise<PostResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    let target: Target;
    try {
      target = this.target(rawUrl);
    } catch (err) {
      return { statusCode: null, headers: {}, body: '', durationMs: elapsed(), error: err instanceof SafeFetchError ? storableText(`${err.code}: ${err.message}`) : 'URL_INVALID: not a valid URL' };
    }
    // The whole attempt (resolving, connecting, the request, the answer) ends by timeoutMs:
    // undici's own timers (connect, headers and body idle time) do not bound it whole, and a
    // body trickling a byte now and then would outlast the delivery's lease (timeout + 5 s), the
    // delivery be claimed and posted again while this request is still open.
    const exchange = new Exchange(this.deadlines, started + this.options.timeoutMs);
    try {
      // Resolving can outlast the deadline too (a resolver that does not answer); an address
      // that comes after it posts nothing (the attempt is over).
      const pool = this.freshPool(poolKey, target.origin) ?? (await Promise.race([this.pool(poolKey, target), exchange.answer.then(() => null)]));
      if (!pool || exchange.ended) throw new DeadlineError();
      pool.agent.dispatch(
        {
          origin: target.origin,
          path: target.path,
          method: 'POST',
          headers: { 'content-type': 'application/json', 'user-agent': 'Clarion-Webhooks', ...headers },
          body,
          // undici's idle timers (its shared coarse timers, cheap) stay as a bound of their own;
          // the deadline comes first.
          headersTimeout: this.options.timeoutMs,
          bodyTimeout: this.options.timeoutMs,
        },
        exchange,
      );
      return { ...(await exchange.answer), durationMs: elapsed() };
    } catch (err) {
      exchange.abandon();
      const e = toFetchError(err, target.href, this.options.timeoutMs);
      return { statusCode: null, headers: {}, body: '', durationMs: elapsed(), error: storableText(`${e.code}: ${e.message}`) };
    }
  }

  /** An endpoint URL parsed and checked once (kept by its text), not per delivery. */
  private target(rawUrl: string): Target {
    let target = this.targets.get(rawUrl);
    if (target) return target;
    const url = new URL(rawUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new SafeFetchError('PROTOCOL_NOT_ALLOWED', `Only http and https URLs, not ${url.protocol}`);
    target = { href: url.href, origin: url.origin, hostname: url.hostname, path: `${url.pathname}${url.search}` };
    if (this.targets.size >= MAX_TARGETS) this.targets.clear();
    this.targets.set(rawUrl, target);
    return target;
  }

  /** The endpoint's pool for this origin while its address check is younger than the TTL, without a turn of the event loop. */
  private freshPool(key: string, origin: string): Pool | undefined {
    const cached = this.pools.get(key);
    return cached && cached.origin === origin && Date.now() - cached.checkedAt < this.dnsTtlMs ? cached : undefined;
  }

  /** The endpoint's pool for the target's origin at a checked address (resolved again once its check is older than the TTL). */
  private async pool(key: string, target: Target): Promise<Pool> {
    const now = Date.now();
    const cached = this.pools.get(key);
    if (cached && cached.origin === target.origin && now - cached.checkedAt < this.dnsTtlMs) return cached;
    const pinned = await resolvePublicAddress(target.hostname, this.options);
    if (cached && cached.origin === target.origin && cached.address === pinned.address) {
      cached.checkedAt = now;
      return cached;
    }
    if (cached) this.drop(key, cached);
    if (this.pools.size >= MAX_POOLS) {
      const [oldestKey, oldest] = this.pools.entries().next().value as [string, Pool];
      this.drop(oldestKey, oldest);
    }
    const agent = new Agent({
      connections: this.options.connectionsPerEndpoint,
      connect: {
        timeout: this.options.timeoutMs,
        lookup: (_hostname: string, opts: { all?: boolean }, callback: (...args: unknown[]) => void) => {
          if (opts?.all) callback(null, [{ address: pinned.address, family: pinned.family }]);
          else callback(null, pinned.address, pinned.family);
        },
      } as Agent.Options['connect'],
    });
    const pool = { origin: target.origin, ...pinned, agent, checkedAt: now };
    this.pools.set(key, pool);
    return pool;
  }

  private drop(key: string, pool: Pool): void {
    this.pools.delete(key);
    pool.agent.close().catch(() => {});
  }

  async close(): Promise<void> {
    this.deadlines.close();
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((p) => p.agent.destroy().catch(() => {})));
  }
}

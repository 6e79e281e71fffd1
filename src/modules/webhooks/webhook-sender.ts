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
  /** The whole exchange, connection to last byte (the issue: 2xx within 15 s). */
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

/**
 * One request on the agent through undici's dispatch API with a handler of its own: the status,
 * the headers and the first 4 KB of the body, read on to 64 KB so the connection can be reused
 * and closed past that. A response body stream, as request() makes, cost about 10 µs CPU per
 * delivery more (bench webhooks: the stream, its listeners and the top-level URL parsing).
 */
function exchange(agent: Agent, options: Dispatcher.DispatchOptions): Promise<Omit<PostResult, 'durationMs' | 'error'>> {
  return new Promise((resolve, reject) => {
    let statusCode = 0;
    let headers: PostResult['headers'] = {};
    const kept: Buffer[] = [];
    let keptBytes = 0;
    let read = 0;
    let cut = false;
    const answer = () => resolve({ statusCode, headers, body: keptBytes === 0 ? '' : storableText(Buffer.concat(kept, keptBytes).toString('utf8')) });
    agent.dispatch(options, {
      // Present so that undici takes this for a handler of its current API (it checks for this hook).
      onRequestStart() {},
      onResponseStart(_controller, status, responseHeaders) {
        // 1xx informational answers come before the final one and replace nothing kept.
        statusCode = status;
        headers = responseHeaders;
      },
      onResponseData(controller, chunk) {
        read += chunk.length;
        if (keptBytes < RESPONSE_KEPT_BYTES) {
          const part = chunk.subarray(0, RESPONSE_KEPT_BYTES - keptBytes);
          kept.push(part);
          keptBytes += part.length;
        }
        if (read > RESPONSE_DRAIN_BYTES && !cut) {
          cut = true;
          controller.abort(new Error('response body over the drain limit'));
        }
      },
      onResponseEnd: answer,
      onResponseError(_controller, err) {
        // Cut on purpose past the drain limit: the answer is what arrived until then.
        if (cut) answer();
        else reject(err);
      },
    });
  });
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
 * connections would let a hanging one hold another's (its requests queued in the pool, where
 * the timeout does not run yet).
 */
export class WebhookSender {
  private readonly pools = new Map<string, Pool>();
  private readonly targets = new Map<string, Target>();
  private readonly dnsTtlMs: number;

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
    try {
      const pool = this.freshPool(poolKey, target.origin) ?? (await this.pool(poolKey, target));
      // undici's own timers bound the exchange: connect (agent), headers and body idle time, each
      // timeoutMs. An AbortSignal.timeout per request cost ~4% of the worker's CPU per delivery
      // (bench webhooks: its timer, signal and listeners); a body that trickles past that is cut
      // at 64 KB, and a worker that never returns is covered by the delivery's lease.
      const answer = await exchange(pool.agent, {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'Clarion-Webhooks', ...headers },
        body,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
      });
      return { ...answer, durationMs: elapsed() };
    } catch (err) {
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
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((p) => p.agent.destroy().catch(() => {})));
  }
}

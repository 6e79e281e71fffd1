import { Agent, request } from 'undici';
import { type HostLookup, SafeFetchError, resolvePublicAddress, toFetchError } from '../../net/ssrf.js';

export interface PushTransportOptions {
  allowPrivateNetworks: boolean;
  timeoutMs: number;
  /** Connections kept per push-service origin. */
  connectionsPerOrigin: number;
  /** How long a checked DNS answer is used before the name is resolved (and checked) again. */
  dnsTtlMs: number;
  /** Extra trusted CA certificates (a local push service in tests and benchmarks). */
  ca?: string | Buffer | (string | Buffer)[];
  lookup?: HostLookup;
  /** The caller's clock: a checked DNS answer's age is read from it. */
  now: () => Date;
}

export interface PushHttpResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The first 2 KB of the body, for the log. */
  text: string;
}

interface OriginEntry {
  address: string;
  agent: Agent;
  expires: number;
}

/**
 * POSTs to user-given push endpoints through the SSRF guard, with keep-alive connections per
 * origin. Each origin's hostname is resolved and checked (resolvePublicAddress) and its
 * connections go to exactly that checked address, whatever DNS says later; the check is redone
 * after dnsTtlMs. Retired agents finish their in-flight requests before they close.
 */
export class PushTransport {
  private readonly origins = new Map<string, Promise<OriginEntry>>();
  private readonly retired = new Set<Agent>();
  private closed = false;

  constructor(private readonly options: PushTransportOptions) {}

  async post(endpoint: string, headers: Record<string, string>, body: Buffer): Promise<PushHttpResponse> {
    if (this.closed) throw new Error('PushTransport is closed');
    const url = parseEndpoint(endpoint);
    const { agent } = await this.agentFor(url);
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    try {
      const res = await request(url, {
        method: 'POST',
        dispatcher: agent,
        headers,
        body,
        signal,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
      });
      let text = '';
      for await (const chunk of res.body) {
        if (text.length < 2048) text += (chunk as Buffer).toString('utf8');
      }
      return { status: res.statusCode, headers: res.headers, text: text.slice(0, 2048) };
    } catch (err) {
      throw toFetchError(err, url.href, this.options.timeoutMs);
    }
  }

  private async agentFor(url: URL): Promise<OriginEntry> {
    const now = this.options.now().getTime();
    const current = this.origins.get(url.origin);
    if (current) {
      const entry = await current.catch(() => undefined);
      if (entry && entry.expires > now) return entry;
      if (this.origins.get(url.origin) !== current) return this.agentFor(url);
    }
    const next = this.resolve(url, current);
    this.origins.set(url.origin, next);
    // A failed resolution is not cached: the next push tries again.
    next.catch(() => {
      if (this.origins.get(url.origin) === next) this.origins.delete(url.origin);
    });
    return next;
  }

  private async resolve(url: URL, previous: Promise<OriginEntry> | undefined): Promise<OriginEntry> {
    const pinned = await resolvePublicAddress(url.hostname, { allowPrivateNetworks: this.options.allowPrivateNetworks, lookup: this.options.lookup }).catch(
      (err: unknown) => {
        throw err instanceof SafeFetchError ? new SafeFetchError(err.code, err.message, url.href) : err;
      },
    );
    const old = await previous?.catch(() => undefined);
    const expires = this.options.now().getTime() + this.options.dnsTtlMs;
    if (old && old.address === pinned.address) return { ...old, expires };
    if (old) this.retire(old.agent);
    const agent = new Agent({
      connections: this.options.connectionsPerOrigin,
      pipelining: 1,
      connect: {
        timeout: this.options.timeoutMs,
        ...(this.options.ca ? { ca: this.options.ca } : {}),
        lookup: (_hostname: string, opts: { all?: boolean }, callback: (...args: unknown[]) => void) => {
          if (opts?.all) callback(null, [{ address: pinned.address, family: pinned.family }]);
          else callback(null, pinned.address, pinned.family);
        },
      } as Agent.Options['connect'],
    });
    return { address: pinned.address, agent, expires };
  }

  private retire(agent: Agent): void {
    this.retired.add(agent);
    // close() lets queued requests finish; a request that picked this agent just before still completes.
    const timer = setTimeout(() => {
      this.retired.delete(agent);
      agent.close().catch(() => {});
    }, 30_000);
    timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    const entries = await Promise.all([...this.origins.values()].map((p) => p.catch(() => undefined)));
    this.origins.clear();
    const agents = [...entries.filter((e): e is OriginEntry => !!e).map((e) => e.agent), ...this.retired];
    this.retired.clear();
    await Promise.all(agents.map((a) => a.close().catch(() => {})));
  }
}

function parseEndpoint(endpoint: string): URL {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new SafeFetchError('URL_INVALID', `Not a valid push endpoint: ${endpoint.slice(0, 200)}`, endpoint);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new SafeFetchError('PROTOCOL_NOT_ALLOWED', `A push endpoint must be an https URL, not ${url.protocol}`, endpoint);
  }
  return url;
}

import dns from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { Agent, request } from 'undici';

/**
 * Outbound fetches of user-given URLs (attachments by URL, icons, webhooks...). A user must not be
 * able to make this server talk to itself, to its private network or to a cloud metadata service,
 * so every hop is resolved, checked, and then connected to exactly the checked address.
 */

export type SafeFetchErrorCode =
  | 'URL_INVALID'
  | 'PROTOCOL_NOT_ALLOWED'
  | 'ADDRESS_BLOCKED'
  | 'DNS_FAILED'
  | 'TOO_MANY_REDIRECTS'
  | 'TOO_LARGE'
  | 'TIMEOUT'
  | 'NETWORK';

export class SafeFetchError extends Error {
  constructor(
    readonly code: SafeFetchErrorCode,
    message: string,
    /** The URL of the hop that failed (after redirects). */
    readonly url?: string,
  ) {
    super(message);
    this.name = 'SafeFetchError';
  }
}

export interface SafeFetchOptions {
  /** Abort (TOO_LARGE) once the body exceeds this many bytes. */
  maxBytes: number;
  /** Whole exchange, redirects and body included. */
  timeoutMs: number;
  allowPrivateNetworks?: boolean;
  /** Individual internal addresses let through even without allowPrivateNetworks (an intranet file server). */
  allowAddresses?: string[];
  /** Redirects followed, each re-checked; default 3. */
  maxRedirects?: number;
  headers?: Record<string, string>;
  /** Resolver, for tests that need a hostname pointing somewhere; default dns.lookup. */
  lookup?: HostLookup;
}

export interface SafeFetchResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  contentType?: string;
  body: Buffer;
  /** Final URL after redirects. */
  url: string;
}

export type HostLookup = (hostname: string) => Promise<{ address: string; family: number }[]>;

const systemLookup: HostLookup = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

/** Never reachable targets, even with allowPrivateNetworks: they are not hosts. */
const ALWAYS_BLOCKED = new BlockList();
ALWAYS_BLOCKED.addSubnet('0.0.0.0', 8, 'ipv4'); // "this network"; 0.0.0.0 reaches localhost on Linux
ALWAYS_BLOCKED.addSubnet('224.0.0.0', 4, 'ipv4'); // multicast
ALWAYS_BLOCKED.addSubnet('240.0.0.0', 4, 'ipv4'); // reserved + broadcast
ALWAYS_BLOCKED.addAddress('::', 'ipv6'); // unspecified
ALWAYS_BLOCKED.addSubnet('ff00::', 8, 'ipv6'); // multicast

/** Internal targets, reachable only with allowPrivateNetworks. */
const PRIVATE = new BlockList();
PRIVATE.addSubnet('10.0.0.0', 8, 'ipv4');
PRIVATE.addSubnet('100.64.0.0', 10, 'ipv4'); // CGNAT
PRIVATE.addSubnet('127.0.0.0', 8, 'ipv4');
PRIVATE.addSubnet('169.254.0.0', 16, 'ipv4'); // link-local, cloud metadata 169.254.169.254
PRIVATE.addSubnet('172.16.0.0', 12, 'ipv4');
PRIVATE.addSubnet('192.0.0.0', 24, 'ipv4'); // IETF protocol assignments
PRIVATE.addSubnet('192.168.0.0', 16, 'ipv4');
PRIVATE.addSubnet('198.18.0.0', 15, 'ipv4'); // benchmarking
PRIVATE.addAddress('::1', 'ipv6');
PRIVATE.addSubnet('fc00::', 7, 'ipv6'); // unique local
PRIVATE.addSubnet('fe80::', 10, 'ipv6'); // link-local
PRIVATE.addSubnet('fec0::', 10, 'ipv6'); // old site-local

/** IPv4 carried inside IPv6 (::ffff:a.b.c.d, ::a.b.c.d, NAT64 64:ff9b::a.b.c.d) is judged as IPv4. */
function embeddedIpv4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  if (dotted) return dotted[1];
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = parseInt(hex[1]!, 16);
    const lo = parseInt(hex[2]!, 16);
    return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
  }
  return undefined;
}

/** Why an IP address may not be fetched from, or undefined when it may. */
export function blockedReason(address: string, allowPrivateNetworks = false, allowAddresses: readonly string[] = []): string | undefined {
  let ip = address.replace(/^\[|\]$/g, '');
  let family = isIP(ip);
  if (family === 0) return 'not an IP address';
  if (family === 6) {
    const v4 = embeddedIpv4(ip);
    if (v4) {
      ip = v4;
      family = 4;
    }
  }
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (ALWAYS_BLOCKED.check(ip, type)) return 'unspecified, multicast or reserved address';
  if (!allowPrivateNetworks && PRIVATE.check(ip, type) && !allowAddresses.includes(ip)) return 'loopback, private or link-local address';
  return undefined;
}

/**
 * Resolves a hostname and returns the one address to connect to, refusing when any of its
 * addresses is internal (a name that also points inside is not trusted with the outside ones).
 */
export async function resolvePublicAddress(
  hostname: string,
  options: { allowPrivateNetworks?: boolean; allowAddresses?: readonly string[]; lookup?: HostLookup } = {},
): Promise<{ address: string; family: 4 | 6 }> {
  const bare = hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  if (isIP(bare)) addresses = [{ address: bare, family: isIP(bare) }];
  else {
    try {
      addresses = await (options.lookup ?? systemLookup)(bare);
    } catch (err) {
      throw new SafeFetchError('DNS_FAILED', `Could not resolve ${bare}: ${(err as Error).message}`);
    }
    if (addresses.length === 0) throw new SafeFetchError('DNS_FAILED', `${bare} has no addresses`);
  }
  for (const { address } of addresses) {
    const reason = blockedReason(address, options.allowPrivateNetworks, options.allowAddresses);
    if (reason) throw new SafeFetchError('ADDRESS_BLOCKED', `${bare} resolves to ${address}, a ${reason}; refusing to connect.`);
  }
  const first = addresses[0]!;
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}

/** An undici Agent whose every connection goes to `pinned`, whatever DNS says by then. */
export function pinnedAgent(pinned: { address: string; family: 4 | 6 }, connectTimeoutMs: number): Agent {
  return new Agent({
    connections: 1,
    pipelining: 0,
    connect: {
      timeout: connectTimeoutMs,
      lookup: (_hostname: string, opts: { all?: boolean }, callback: (...args: unknown[]) => void) => {
        if (opts?.all) callback(null, [{ address: pinned.address, family: pinned.family }]);
        else callback(null, pinned.address, pinned.family);
      },
    } as Agent.Options['connect'],
  });
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

function parseTarget(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new SafeFetchError('URL_INVALID', `Not a valid URL: ${raw.slice(0, 200)}`, raw);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new SafeFetchError('PROTOCOL_NOT_ALLOWED', `Only http and https URLs can be fetched, not ${url.protocol}`, raw);
  }
  return url;
}

/** GET a user-given URL with the guard, a byte cap and a deadline. Non-2xx statuses are returned, not thrown. */
export async function safeFetch(rawUrl: string, options: SafeFetchOptions): Promise<SafeFetchResponse> {
  const maxRedirects = options.maxRedirects ?? 3;
  const deadline = AbortSignal.timeout(options.timeoutMs);
  let url = parseTarget(rawUrl);
  for (let hop = 0; ; hop++) {
    const pinned = await resolvePublicAddress(url.hostname, options).catch((err: unknown) => {
      if (err instanceof SafeFetchError) throw new SafeFetchError(err.code, err.message, url.href);
      throw err;
    });
    if (deadline.aborted) throw new SafeFetchError('TIMEOUT', `Timed out after ${options.timeoutMs} ms`, url.href);
    const agent = pinnedAgent(pinned, options.timeoutMs);
    try {
      const res = await request(url, {
        method: 'GET',
        dispatcher: agent,
        signal: deadline,
        headers: { 'user-agent': 'Clarion', ...options.headers },
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
      }).catch((err: unknown) => {
        throw toFetchError(err, url.href, options.timeoutMs);
      });
      // Once we stop reading, undici reports the abort as an 'error' event: nothing to do with it.
      res.body.on('error', () => {});
      if (REDIRECTS.has(res.statusCode)) {
        res.body.resume();
        const location = res.headers.location;
        if (typeof location !== 'string' || !location) {
          throw new SafeFetchError('NETWORK', `Redirect ${res.statusCode} without a Location header`, url.href);
        }
        if (hop >= maxRedirects) throw new SafeFetchError('TOO_MANY_REDIRECTS', `More than ${maxRedirects} redirects`, url.href);
        url = parseTarget(new URL(location, url).href);
        continue;
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) {
        res.body.destroy();
        throw new SafeFetchError('TOO_LARGE', `The response is ${declared} bytes, over the ${options.maxBytes} byte limit`, url.href);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      try {
        for await (const chunk of res.body) {
          size += (chunk as Buffer).length;
          if (size > options.maxBytes) {
            res.body.destroy();
            throw new SafeFetchError('TOO_LARGE', `The response is over the ${options.maxBytes} byte limit`, url.href);
          }
          chunks.push(chunk as Buffer);
        }
      } catch (err) {
        throw toFetchError(err, url.href, options.timeoutMs);
      }
      const contentType = res.headers['content-type'];
      return {
        status: res.statusCode,
        headers: res.headers,
        contentType: typeof contentType === 'string' ? contentType : undefined,
        body: Buffer.concat(chunks, size),
        url: url.href,
      };
    } finally {
      agent.destroy().catch(() => {});
    }
  }
}

/** Any failure of a guarded request as a SafeFetchError (TIMEOUT or NETWORK unless it already is one). */
export function toFetchError(err: unknown, url: string, timeoutMs: number): SafeFetchError {
  if (err instanceof SafeFetchError) return err;
  const e = err as { name?: string; code?: string; message?: string };
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || /TIMEOUT/.test(e.code ?? '')) {
    return new SafeFetchError('TIMEOUT', `Timed out after ${timeoutMs} ms`, url);
  }
  return new SafeFetchError('NETWORK', `${e.code ? `${e.code}: ` : ''}${e.message ?? String(err)}`, url);
}

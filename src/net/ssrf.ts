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

/** Internal or non-global IPv4 targets, reachable only with allowPrivateNetworks. */
const PRIVATE_V4 = new BlockList();
PRIVATE_V4.addSubnet('10.0.0.0', 8, 'ipv4');
PRIVATE_V4.addSubnet('100.64.0.0', 10, 'ipv4'); // CGNAT
PRIVATE_V4.addSubnet('127.0.0.0', 8, 'ipv4');
PRIVATE_V4.addSubnet('169.254.0.0', 16, 'ipv4'); // link-local, cloud metadata 169.254.169.254
PRIVATE_V4.addSubnet('172.16.0.0', 12, 'ipv4');
PRIVATE_V4.addSubnet('192.0.0.0', 24, 'ipv4'); // IETF protocol assignments
PRIVATE_V4.addSubnet('192.0.2.0', 24, 'ipv4'); // TEST-NET-1
PRIVATE_V4.addSubnet('192.168.0.0', 16, 'ipv4');
PRIVATE_V4.addSubnet('198.18.0.0', 15, 'ipv4'); // benchmarking
PRIVATE_V4.addSubnet('198.51.100.0', 24, 'ipv4'); // TEST-NET-2
PRIVATE_V4.addSubnet('203.0.113.0', 24, 'ipv4'); // TEST-NET-3

/** Global unicast: the only IPv6 space reachable without allowPrivateNetworks... */
const GLOBAL_V6 = new BlockList();
GLOBAL_V6.addSubnet('2000::', 3, 'ipv6');
/** ...minus the parts of it IANA marks as not globally reachable. */
const NON_GLOBAL_V6 = new BlockList();
NON_GLOBAL_V6.addSubnet('2001:2::', 48, 'ipv6'); // benchmarking
NON_GLOBAL_V6.addSubnet('2001:10::', 28, 'ipv6'); // ORCHID (deprecated)
NON_GLOBAL_V6.addSubnet('2001:20::', 28, 'ipv6'); // ORCHIDv2
NON_GLOBAL_V6.addSubnet('2001:db8::', 32, 'ipv6'); // documentation
NON_GLOBAL_V6.addSubnet('3fff::', 20, 'ipv6'); // documentation (RFC 9637)
NON_GLOBAL_V6.addSubnet('5f00::', 16, 'ipv6'); // SRv6 SIDs

/** The eight 16-bit groups of an address isIP() already accepted as IPv6 (zone id dropped). */
function ipv6Groups(address: string): number[] {
  const bare = address.split('%')[0].toLowerCase();
  const toGroups = (part: string): number[] => {
    if (part === '') return [];
    return part.split(':').flatMap((piece) => {
      if (!piece.includes('.')) return [parseInt(piece, 16)];
      const [a, b, c, d] = piece.split('.').map(Number) as [number, number, number, number];
      return [(a << 8) | b, (c << 8) | d];
    });
  };
  const [head, tail] = bare.split('::') as [string, string | undefined];
  const left = toGroups(head);
  if (tail === undefined) return left;
  const right = toGroups(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function ipv4FromGroups(hi: number, lo: number): string {
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
}

/**
 * Every IPv4 address an IPv6 address carries and that traffic to it would reach: IPv4-mapped
 * (::ffff:0:0/96), SIIT (::ffff:0:0:0/96), IPv4-compatible (::/96), NAT64 (64:ff9b::/96), 6to4
 * (2002::/16) and Teredo (2001::/32: server, and client XOR 0xffff). An empty list: none.
 */
function embeddedIpv4(g: readonly number[]): string[] {
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const last = ipv4FromGroups(g[6], g[7]);
  if (zeros(0, 5) && g[5] === 0xffff) return [last];
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return [last];
  if (zeros(0, 6)) return [last];
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return [last];
  if (g[0] === 0x2002) return [ipv4FromGroups(g[1], g[2])];
  if (g[0] === 0x2001 && g[1] === 0) return [ipv4FromGroups(g[2], g[3]), ipv4FromGroups(g[6] ^ 0xffff, g[7] ^ 0xffff)];
  return [];
}

function ipv4Reason(ip: string, allowPrivateNetworks: boolean, allowAddresses: readonly string[]): string | undefined {
  if (ALWAYS_BLOCKED.check(ip, 'ipv4')) return 'unspecified, multicast or reserved address';
  if (!allowPrivateNetworks && PRIVATE_V4.check(ip, 'ipv4') && !allowAddresses.includes(ip)) return 'loopback, private or link-local address';
  return undefined;
}

/** Why an IP address may not be fetched from, or undefined when it may. */
export function blockedReason(address: string, allowPrivateNetworks = false, allowAddresses: readonly string[] = []): string | undefined {
  const ip = address.replace(/^\[|\]$/g, '');
  const family = isIP(ip);
  if (family === 0) return 'not an IP address';
  if (family === 4) return ipv4Reason(ip, allowPrivateNetworks, allowAddresses);
  const bare = ip.split('%')[0];
  if (ALWAYS_BLOCKED.check(bare, 'ipv6')) return 'unspecified, multicast or reserved address';
  const groups = ipv6Groups(bare);
  // ::1 reads as IPv4-compatible 0.0.0.1; it is loopback, not "this network".
  const isLoopback = groups.slice(0, 7).every((x) => x === 0) && groups[7] === 1;
  const carried = isLoopback ? [] : embeddedIpv4(groups);
  for (const v4 of carried) {
    const reason = ipv4Reason(v4, allowPrivateNetworks, allowAddresses);
    if (reason) return `${reason} (${v4} inside ${bare})`;
  }
  if (allowPrivateNetworks || allowAddresses.includes(ip) || allowAddresses.includes(bare)) return undefined;
  // An IPv4-carrying form outside 2000::/3 (mapped, NAT64) is judged by its IPv4 alone.
  if (carried.length > 0 && !GLOBAL_V6.check(bare, 'ipv6')) return undefined;
  if (!GLOBAL_V6.check(bare, 'ipv6') || NON_GLOBAL_V6.check(bare, 'ipv6')) return 'loopback, private, link-local or non-global IPv6 address';
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
    // A name's address is not echoed: the message reaches the caller (a 400, an attempt's error),
    // and would let any API key read what internal names resolve to.
    if (reason) throw new SafeFetchError('ADDRESS_BLOCKED', isIP(bare) ? `${bare} is a ${reason}; refusing to connect.` : `${bare} resolves to a ${reason}; refusing to connect.`);
  }
  const first = addresses[0];
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

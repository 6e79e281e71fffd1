import { normalizeIP } from '@fastify/rate-limit';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { AuthContext } from '../modules/auth/auth-context.js';
import type { BucketWindow, HitCounter } from '../modules/rate-limits/hit-counters.js';
import type { App } from './types.js';

/**
 * Routes no limit applies to (README: Rate limits): health and metrics (a load balancer or a
 * scraper polls them from one address, and must see the truth when the API is busiest), the
 * carrier's callbacks (they carry every account's delivery reports from a few provider addresses
 * and prove themselves with signatures; a 429 would lose a report) and the development carrier's
 * Twilio-protocol API (this server's own workers call it over loopback for every text and call).
 */
const UNLIMITED = new Set([
  'GET /status',
  'GET /metrics',
  'POST /telephony/twilio/sms-status',
  'POST /telephony/twilio/call-status',
  'POST /telephony/twilio/inbound',
  'POST /dev-carrier/2010-04-01/Accounts/:accountSid/Messages.json',
  'POST /dev-carrier/2010-04-01/Accounts/:accountSid/Calls.json',
  'GET /dev-carrier/2010-04-01/Accounts/:accountSid/Messages/:resource',
  'GET /dev-carrier/2010-04-01/Accounts/:accountSid/Calls/:resource',
]);

const TOO_MANY = Type.Ref('ErrorBody', { description: 'RATE_LIMITED: over a rate limit; Retry-After says in how many seconds to retry (README: Rate limits).' });

type RateLimitSettings = Pick<Config, 'rateLimitPerKey' | 'rateLimitPerIp' | 'rateLimitWindowMs'>;

/** One limit: at most `max` requests per window of `windowMs` in the bucket a request falls in. */
interface Limit {
  max: number;
  windowMs: number;
  bucket: (request: FastifyRequest) => string;
  /** Named in the 429's message and fix. */
  what: 'address' | 'credential';
  variable: string;
  /** Requests this limit does not count. */
  exempt?: (request: FastifyRequest) => boolean;
}

/**
 * Rate limits counted by `counter` (in memory on SQLite, in the shared database on PostgreSQL):
 * per client address on every route but the UNLIMITED ones, before authentication (failed
 * credentials count too), and per credential on the routes that take server credentials, after
 * authentication has named it. Over a limit: 429 RATE_LIMITED with Retry-After and x-ratelimit-*
 * headers (below it, see limitHook). Unknown paths are not counted: a 404 costs less to answer
 * than to count. Install after installAuth (its hook then runs between the two; checked).
 *
 * The checks are hooks of our own over the counter rather than @fastify/rate-limit's
 * createRateLimit (used before; only its normalizeIP is kept): its check is an async chain (a
 * key generator, the store's callback and the result each awaited) around the same counter.
 * Measured on POST /send, API process alone, SQLite: with both limits on, 171-190 µs of CPU per
 * request against 156-171 with both off, on a host whose syscalls were slow that day; a hit of
 * the in-memory counter answers synchronously, and so does the check now.
 */
export function installRateLimits(app: App, settings: RateLimitSettings, counter: HitCounter): void {
  const { rateLimitPerIp: perIp, rateLimitPerKey: perKey, rateLimitWindowMs: windowMs } = settings;
  if (perIp === null && perKey === null) return;
  const byIp = perIp === null ? null : limitHook(counter, { max: perIp, windowMs, bucket: (request) => addressBucket(request.ip), what: 'address', variable: 'CLARION_RATE_LIMIT_PER_IP' });
  // A public key is in every page of its site, used by all of its visitors and readable by anyone:
  // a count of its own would let one visitor spend every visitor's allowance. Per address only.
  const byKey =
    perKey === null
      ? null
      : limitHook(counter, {
          max: perKey,
          windowMs,
          bucket: (request) => credentialBucket(request.auth),
          what: 'credential',
          variable: 'CLARION_RATE_LIMIT_PER_KEY',
          exempt: (request) => request.auth.publicKey === true,
        });

  app.addHook('onRoute', (route) => {
    const method = Array.isArray(route.method) ? route.method[0] : route.method;
    if (UNLIMITED.has(`${method === 'HEAD' ? 'GET' : method} ${route.url}`)) return;
    // installAuth's onRoute, which sets config.auth, put the credential check first of the route's
    // own hooks: the address limit goes before it, the credential's after all of them.
    if (route.config?.auth === undefined) throw new Error(`Route ${route.url}: install rate limits after installAuth.`);
    const own = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
    const keyed = byKey !== null && route.config.auth === 'account';
    route.onRequest = [...(byIp ? [byIp] : []), ...own, ...(keyed ? [byKey] : [])] as typeof route.onRequest;
    // The OpenAPI document lists the 429 of every limited operation that lists its answers.
    const response = route.schema?.response as Record<string, unknown> | undefined;
    if (response && !(429 in response)) route.schema = { ...route.schema, response: { ...response, 429: TOO_MANY } };
  });
}

/** The bucket of a client address: IPv6 by its /64 (the plugin's normalizeIP); IPv4 as it is, without normalizeIP's IPv6 test. */
function addressBucket(ip: string): string {
  return `ip:${ip.includes(':') ? normalizeIP(ip) : ip}`;
}

/**
 * The bucket of an authenticated caller: the API key's id (never the key), the environment of
 * Basic client credentials, the account and subject of a JWT.
 */
function credentialBucket(auth: AuthContext): string {
  if (auth.keyId !== undefined) return `key:${auth.keyId}`;
  return auth.via === 'basic' ? `client:${auth.envId}` : `jwt:${auth.accountId}:${auth.subject ?? ''}`;
}

/**
 * An onRequest hook answering 429 past the limit, with Retry-After and the x-ratelimit-* headers.
 * Below the limit the x-ratelimit-* headers come once half the window's allowance is used, of the
 * tightest limit so far: three more headers on every answer cost about 8,500 instructions per
 * request (callgrind, a bare route over HTTP: 10% of it, 3% of POST /send), paid by every
 * integration far from its limits; one nearing a limit sees them. A counter that answers at once
 * (in memory) is decided at once; one that answers later (a shared database), when it answers.
 */
function limitHook(counter: HitCounter, limit: Limit): onRequestHookHandler {
  const decide = (reply: FastifyReply, window: BucketWindow, done: (err?: Error) => void) => {
    const resetSeconds = Math.ceil(window.ttlMs / 1000);
    if (window.count > limit.max) {
      limitHeaders(reply, limit.max, 0, resetSeconds).header('retry-after', resetSeconds);
      return done(
        new AppError(
          'RATE_LIMITED',
          `Too many requests from this ${limit.what}: at most ${limit.max} per ${limit.windowMs / 1000} s.`,
          `Retry after ${resetSeconds} s (Retry-After), and spread requests over time; a server operator can raise ${limit.variable}.`,
        ),
      );
    }
    const remaining = limit.max - window.count;
    if (remaining <= limit.max / 2 && !(Number(reply.getHeader('x-ratelimit-remaining') ?? Infinity) <= remaining)) {
      limitHeaders(reply, limit.max, remaining, resetSeconds);
    }
    done();
  };
  return (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    if (limit.exempt?.(request)) return done();
    let window: BucketWindow | Promise<BucketWindow>;
    try {
      window = counter.hit(limit.bucket(request), limit.windowMs, limit.max);
    } catch (err) {
      return done(err as Error);
    }
    if (window instanceof Promise) window.then((w) => decide(reply, w, done), done);
    else decide(reply, window, done);
  };
}

function limitHeaders(reply: FastifyReply, max: number, remaining: number, resetSeconds: number): FastifyReply {
  return reply.header('x-ratelimit-limit', max).header('x-ratelimit-remaining', remaining).header('x-ratelimit-reset', resetSeconds);
}

import { createRequire } from 'node:module';
import type WebPushLibrary from 'web-push';
import { retryAfterMs } from '../../net/retry-after.js';
import { longestFitting } from './fit-text.js';
import { SafeFetchError, type HostLookup } from '../../net/ssrf.js';
import { DeliveryError } from '../types.js';
import { type PushLifetimeStart, pushLifetime } from './push-lifetime.js';
import { PushTransport } from './web-push-transport.js';
import { type VapidCredentials, VapidTokenCache } from './web-push-vapid.js';

export type { VapidCredentials } from './web-push-vapid.js';

const require = createRequire(import.meta.url);
/** The web-push library, loaded at the first web push sent: a process that sends none never holds it (docs/memory.md). */
const webPushLibrary = () => require('web-push') as typeof WebPushLibrary;

/** A browser PushSubscription as JSON (the user's `webPushTokens[].sub`). */
export interface WebPushSubscription {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

export type WebPushUrgency = 'very-low' | 'low' | 'normal' | 'high';

export interface WebPushSendOptions {
  /** How long the push service may keep the push (default WebPushSenderOptions.ttlSeconds), counted from lifetimeStart. */
  ttlSeconds?: number;
  /** Where the TTL starts counting: the send, so that a retry gets only what is left. Absent: now. */
  lifetimeStart?: PushLifetimeStart;
  urgency?: WebPushUrgency;
  /** Coalescing key (at most 32 base64url characters): a newer push with the same topic replaces an undelivered one. */
  topic?: string;
}

/** What one push service said about one subscription. */
export type WebPushOutcome =
  | { ok: true; endpoint: string; status: number; /** RFC 8030 push message resource. */ location?: string }
  | {
      ok: false;
      endpoint: string;
      /** gone: 404/410, the subscription is dead; retry: 429, 5xx or the network; rejected: anything else. */
      kind: 'gone' | 'retry' | 'rejected';
      code: string;
      status?: number;
      reason: string;
      retryAfterMs?: number;
    };

export interface WebPushSenderOptions {
  now: () => Date;
  allowPrivateNetworks: boolean;
  ttlSeconds: number;
  urgency: WebPushUrgency;
  timeoutMs?: number;
  connectionsPerOrigin?: number;
  dnsTtlMs?: number;
  /** Extra trusted CA certificates, for a local push service over https. */
  ca?: string | Buffer | (string | Buffer)[];
  lookup?: HostLookup;
}

/** RFC 8291 section 4: one record of at most 4096 bytes; 4096 - 86 header/tag/padding bytes of plaintext. */
export const MAX_WEB_PUSH_PLAINTEXT = 3993;
/** The longest Retry-After we wait for before the next attempt. */
const MAX_RETRY_AFTER_MS = 3600_000;

/**
 * Web push (RFC 8030) with VAPID (RFC 8292) and aes128gcm payload encryption (RFC 8291). The
 * web-push library encrypts and builds the request; the VAPID token comes from a per-origin cache
 * and the request leaves through the SSRF-guarded, keep-alive PushTransport.
 */
export class WebPushSender {
  readonly tokens: VapidTokenCache;
  private readonly transport: PushTransport;

  constructor(private readonly options: WebPushSenderOptions) {
    this.tokens = new VapidTokenCache(options.now);
    this.transport = new PushTransport({
      allowPrivateNetworks: options.allowPrivateNetworks,
      timeoutMs: options.timeoutMs ?? 15_000,
      connectionsPerOrigin: options.connectionsPerOrigin ?? 64,
      dnsTtlMs: options.dnsTtlMs ?? 60_000,
      ca: options.ca,
      lookup: options.lookup,
      now: options.now,
    });
  }

  async send(vapid: VapidCredentials, subscription: WebPushSubscription, payload: string | Buffer, options: WebPushSendOptions = {}): Promise<WebPushOutcome> {
    const endpoint = subscription.endpoint;
    let origin: string;
    try {
      origin = new URL(endpoint).origin;
    } catch {
      return { ok: false, endpoint, kind: 'rejected', code: 'INVALID_SUBSCRIPTION', reason: 'the subscription endpoint is not a URL' };
    }
    let ttl: number;
    try {
      ttl = ttlLeft(options.ttlSeconds ?? this.options.ttlSeconds, options.lifetimeStart, this.options.now().getTime());
    } catch (err) {
      if (!(err instanceof DeliveryError)) throw err;
      return { ok: false, endpoint, kind: 'rejected', code: err.code, reason: err.message };
    }
    let details: ReturnType<typeof WebPushLibrary.generateRequestDetails>;
    try {
      details = webPushLibrary().generateRequestDetails(subscription, payload, {
        // No VAPID details: the library would sign a new JWT for every request; ours comes from the cache.
        vapidDetails: null as unknown as undefined,
        headers: { Authorization: this.tokens.authorization(vapid, origin) },
        TTL: ttl,
        urgency: options.urgency ?? this.options.urgency,
        ...(options.topic ? { topic: options.topic } : {}),
      });
    } catch (err) {
      return { ok: false, endpoint, kind: 'rejected', code: 'INVALID_SUBSCRIPTION', reason: `the subscription cannot be encrypted to: ${(err as Error).message}` };
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(details.headers)) headers[name.toLowerCase()] = String(value);

    let res;
    try {
      res = await this.transport.post(endpoint, headers, details.body ?? Buffer.alloc(0));
    } catch (err) {
      if (!(err instanceof SafeFetchError)) throw err;
      const permanent = err.code === 'ADDRESS_BLOCKED' || err.code === 'URL_INVALID' || err.code === 'PROTOCOL_NOT_ALLOWED';
      return permanent
        ? { ok: false, endpoint, kind: 'rejected', code: 'ENDPOINT_BLOCKED', reason: err.message }
        : { ok: false, endpoint, kind: 'retry', code: err.code === 'TIMEOUT' ? 'TIMEOUT' : 'NETWORK', reason: err.message };
    }
    const status = res.status;
    if (status >= 200 && status < 300) {
      const location = typeof res.headers.location === 'string' ? res.headers.location : undefined;
      return { ok: true, endpoint, status, ...(location ? { location } : {}) };
    }
    const said = `push service answered ${status}${res.text ? `: ${res.text.trim().slice(0, 300)}` : ''}`;
    if (status === 404 || status === 410) return { ok: false, endpoint, kind: 'gone', code: 'SUBSCRIPTION_GONE', status, reason: said };
    if (status === 429 || status >= 500) {
      const retryAfterMs = parseRetryAfter(res.headers['retry-after'], this.options.now());
      return { ok: false, endpoint, kind: 'retry', code: status === 429 ? 'RATE_LIMITED' : 'PUSH_SERVICE_ERROR', status, reason: said, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    }
    const code = status === 413 ? 'PAYLOAD_TOO_LARGE' : status === 401 || status === 403 ? 'VAPID_REJECTED' : 'PUSH_REJECTED';
    return { ok: false, endpoint, kind: 'rejected', code, status, reason: said };
  }

  close(): Promise<void> {
    return this.transport.close();
  }
}

/**
 * The TTL header of an attempt: what is left of `ttlSeconds` since the send, in whole seconds
 * rounded up (the header takes no fractions; rounding down would turn the last second into 0,
 * "now or never", and take a second from a push sent at once). An explicit 0 stays 0 on the first
 * attempt. Throws PUSH_EXPIRED (a DeliveryError) when nothing is left.
 */
function ttlLeft(ttlSeconds: number, start: PushLifetimeStart | undefined, nowMs: number): number {
  const lifetime = pushLifetime(ttlSeconds, start, nowMs, 'the web push TTL (CLARION_WEB_PUSH_TTL)');
  return lifetime.kind === 'now-or-never' ? 0 : Math.ceil(lifetime.remainingMs / 1000);
}

/** Retry-After as delay-seconds or an HTTP-date (RFC 9110 section 10.2.3), in ms from now; capped at an hour. */
export function parseRetryAfter(value: string | string[] | undefined, now: Date): number | undefined {
  const ms = retryAfterMs(value, now);
  return ms === null ? undefined : Math.min(ms, MAX_RETRY_AFTER_MS);
}

/**
 * The notification a service worker receives (`event.data.json()`): its JSON at most
 * MAX_WEB_PUSH_PLAINTEXT bytes, one record, as RFC 8291 section 4 requires (push services need
 * accept no more, RFC 8030 section 7.2). What does not fit gives way in this order: the message
 * is shortened; should the rest not fit even without it, the icon is left out, then the title
 * shortened, then the url left out. Texts are cut between characters, never inside one, and end
 * with "…".
 */
export function webPushPayload(content: { title: string; message: string; icon?: string; url?: string }): Buffer {
  const build = (c: typeof content) => Buffer.from(JSON.stringify({ title: c.title, message: c.message, icon: c.icon, url: c.url }), 'utf8');
  const fits = (c: typeof content) => build(c).length <= MAX_WEB_PUSH_PLAINTEXT;
  let shown = content;
  const withoutMessage = () => ({ ...shown, message: '' });
  const shortenTitle = () => (shown = { ...shown, title: longestFitting(content.title, (title) => fits({ ...withoutMessage(), title })) });
  if (!fits(withoutMessage())) shown = { ...shown, icon: undefined };
  if (!fits(withoutMessage())) shortenTitle();
  if (!fits(withoutMessage())) {
    shown = { ...shown, url: undefined };
    shortenTitle();
  }
  return build({ ...shown, message: longestFitting(shown.message, (message) => fits({ ...shown, message })) });
}


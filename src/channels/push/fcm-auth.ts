import { SignJWT, importPKCS8 } from 'jose';
import type { Clock } from '../../deps.js';
import { DeliveryError } from '../types.js';
import { FCM_SCOPE, type FcmServiceAccount } from './fcm-account.js';
import { TransportError, post, retryAfterMs } from './fcm-http.js';

export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ASSERTION_LIFETIME_S = 3600;

/** The RS256 assertion of the OAuth 2.0 JWT-bearer grant (RFC 7523), as Google's token endpoint expects it. */
export async function signAssertion(account: FcmServiceAccount, now: Date): Promise<string> {
  const key = await importPKCS8(account.privateKey, 'RS256');
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ scope: FCM_SCOPE })
    .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(account.privateKeyId ? { kid: account.privateKeyId } : {}) })
    .setIssuer(account.clientEmail)
    .setAudience(account.tokenUri)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ASSERTION_LIFETIME_S)
    .sign(key);
}

export interface AccessToken {
  token: string;
  /** Epoch ms from which the token is no longer used (shortly before the server's expiry). */
  refreshAt: number;
}

export interface TokenOptions {
  clock: Clock;
  /** Lets token_uri reach loopback/private addresses (CLARION_ALLOW_PRIVATE_NETWORKS). */
  allowPrivateNetworks: boolean;
  timeoutMs: number;
  /** Stop using a token this long before it expires (at most half its lifetime). */
  refreshMarginMs: number;
}

/** Exchanges a signed assertion for an access token at the account's token_uri (behind the SSRF guard). */
export async function fetchAccessToken(account: FcmServiceAccount, options: TokenOptions): Promise<AccessToken> {
  const now = options.clock.now();
  const assertion = await signAssertion(account, now);
  let answer;
  try {
    answer = await post(account.tokenUri, {
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT, assertion }).toString(),
      timeoutMs: options.timeoutMs,
      guard: { allowPrivateNetworks: options.allowPrivateNetworks },
    });
  } catch (err) {
    if (!(err instanceof TransportError)) throw err;
    if (err.kind === 'BLOCKED') {
      throw new DeliveryError('FCM_TOKEN_URI_BLOCKED', `The service account's token_uri is not reachable: ${err.message}`, { retryable: false });
    }
    throw new DeliveryError(err.kind === 'TIMEOUT' ? 'TIMEOUT' : 'FCM_CONNECTION_FAILED', `OAuth token request failed: ${err.message}`, { retryable: true });
  }
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(answer.text) as Record<string, unknown>;
  } catch {
    /* not JSON: judged by status below */
  }
  if (answer.status === 429 || answer.status >= 500) {
    const retryAfter = retryAfterMs(answer.headers, options.clock.now());
    throw new DeliveryError('FCM_UNAVAILABLE', `The OAuth token endpoint answered HTTP ${answer.status}.`, {
      retryable: true,
      providerCode: String(answer.status),
      ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}),
    });
  }
  if (answer.status !== 200) {
    const code = typeof body.error === 'string' ? body.error : String(answer.status);
    const description = typeof body.error_description === 'string' ? `: ${body.error_description.slice(0, 300)}` : '';
    throw new DeliveryError('FCM_AUTH_FAILED', `The OAuth token endpoint refused the service account (${code}${description}).`, { retryable: false, providerCode: code });
  }
  const token = body.access_token;
  const expiresIn = Number(body.expires_in ?? 3600);
  if (typeof token !== 'string' || !token || !Number.isFinite(expiresIn) || expiresIn <= 0) {
    throw new DeliveryError('FCM_AUTH_FAILED', 'The OAuth token endpoint answered without access_token/expires_in.', { retryable: true });
  }
  const lifetimeMs = expiresIn * 1000;
  return { token, refreshAt: now.getTime() + lifetimeMs - Math.min(options.refreshMarginMs, lifetimeMs / 2) };
}

/**
 * Access tokens per environment, reused until shortly before they expire. Concurrent sends of one
 * environment share one token request. `version` names the stored credentials, so replacing
 * them (PUT /settings/push/fcm) stops the old token from being used.
 */
export class FcmTokenCache {
  private readonly tokens = new Map<string, { version: string; value: AccessToken }>();
  private readonly pending = new Map<string, { version: string; promise: Promise<AccessToken> }>();

  constructor(private readonly options: TokenOptions) {}

  async get(key: string, version: string, account: FcmServiceAccount): Promise<string> {
    const cached = this.tokens.get(key);
    if (cached && cached.version === version && this.options.clock.now().getTime() < cached.value.refreshAt) return cached.value.token;
    const inFlight = this.pending.get(key);
    if (inFlight && inFlight.version === version) return (await inFlight.promise).token;
    const promise = fetchAccessToken(account, this.options);
    this.pending.set(key, { version, promise });
    try {
      const value = await promise;
      this.tokens.set(key, { version, value });
      return value.token;
    } finally {
      if (this.pending.get(key)?.promise === promise) this.pending.delete(key);
    }
  }

  /** Forgets `token` (FCM answered 401 with it); a newer token of the same key is kept. */
  invalidate(key: string, token: string): void {
    if (this.tokens.get(key)?.value.token === token) this.tokens.delete(key);
  }

  clear(): void {
    this.tokens.clear();
  }
}

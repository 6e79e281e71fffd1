import { type KeyObject, createPrivateKey, sign } from 'node:crypto';

/** An environment's VAPID identity (RFC 8292): P-256 keys in the web-push library's base64url format. */
export interface VapidCredentials {
  /** Uncompressed public point (65 bytes), base64url. */
  publicKey: string;
  /** Private scalar (32 bytes), base64url. */
  privateKey: string;
  /** mailto: or https: contact of the sender. */
  subject: string;
}

/** The longest a push service accepts (RFC 8292 section 2: at most 24 hours). */
const TOKEN_LIFETIME_SECONDS = 12 * 3600;
/** A token is replaced once less than this is left, so a request never carries one about to expire. */
const REFRESH_MARGIN_SECONDS = 3600;
const MAX_CACHED_TOKENS = 10_000;

const b64url = (value: Buffer | string) => Buffer.from(value).toString('base64url');

/** Imports the library's raw key format as a KeyObject (JWK needs the public point's x and y). */
export function vapidSigningKey(credentials: Pick<VapidCredentials, 'publicKey' | 'privateKey'>): KeyObject {
  const pub = Buffer.from(credentials.publicKey, 'base64url');
  const d = Buffer.from(credentials.privateKey, 'base64url');
  if (pub.length !== 65 || pub[0] !== 4) throw new Error('VAPID public key must be an uncompressed P-256 point (65 bytes)');
  if (d.length !== 32) throw new Error('VAPID private key must be 32 bytes');
  return createPrivateKey({
    format: 'jwk',
    key: { kty: 'EC', crv: 'P-256', d: b64url(d), x: b64url(pub.subarray(1, 33)), y: b64url(pub.subarray(33, 65)) },
  });
}

/** `vapid t=<ES256 JWT>, k=<public key>` for one audience (the push service's origin). */
export function vapidAuthorization(key: KeyObject, credentials: VapidCredentials, audience: string, expiresAt: number): string {
  const header = b64url(JSON.stringify({ typ: 'JWT', alg: 'ES256' }));
  const payload = b64url(JSON.stringify({ aud: audience, exp: expiresAt, sub: credentials.subject }));
  const input = `${header}.${payload}`;
  // JWS wants the raw r||s signature, not DER.
  const signature = sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
  return `vapid t=${input}.${b64url(signature)}, k=${credentials.publicKey}`;
}

/**
 * VAPID Authorization headers cached per (sender identity, push-service origin) until close to
 * expiry: signing an ES256 JWT on every push (what the web-push library does) costs more than
 * the rest of building the request, and one token serves every subscription of that origin.
 */
export class VapidTokenCache {
  private readonly tokens = new Map<string, { header: string; expiresAt: number }>();
  private readonly keys = new Map<string, KeyObject>();

  constructor(private readonly now: () => Date) {}

  authorization(credentials: VapidCredentials, audience: string): string {
    const nowSeconds = Math.floor(this.now().getTime() / 1000);
    const cacheKey = `${credentials.publicKey} ${credentials.subject} ${audience}`;
    const cached = this.tokens.get(cacheKey);
    if (cached && cached.expiresAt - nowSeconds > REFRESH_MARGIN_SECONDS) return cached.header;
    let key = this.keys.get(credentials.publicKey);
    if (!key) {
      key = vapidSigningKey(credentials);
      if (this.keys.size >= MAX_CACHED_TOKENS) this.keys.clear();
      this.keys.set(credentials.publicKey, key);
    }
    const expiresAt = nowSeconds + TOKEN_LIFETIME_SECONDS;
    const header = vapidAuthorization(key, credentials, audience, expiresAt);
    if (this.tokens.size >= MAX_CACHED_TOKENS) {
      // Oldest insertion first: drops identities or origins not used for a while.
      this.tokens.delete(this.tokens.keys().next().value as string);
    }
    this.tokens.delete(cacheKey);
    this.tokens.set(cacheKey, { header, expiresAt });
    return header;
  }

  get size(): number {
    return this.tokens.size;
  }
}

import { createHash } from 'node:crypto';
import { SignJWT, importPKCS8 } from 'jose';
import type { Clock } from '../../deps.js';

export interface ApnsSigningKey {
  keyId: string;
  teamId: string;
  /** PKCS#8 PEM of the .p8 key. */
  privateKey: string;
}

/** APNs rejects provider tokens older than an hour and throttles refreshes under 20 minutes. */
export const APNS_TOKEN_REFRESH_SECONDS = 50 * 60;

interface Cached {
  jwt: Promise<string>;
  issuedAt: number;
}

/**
 * Provider authentication tokens (ES256 JWT, `{iss: teamId, iat}`, header `{alg, kid}`), one per
 * signing key, reused until close to expiry. Concurrent sends share one signing.
 */
export class ApnsTokenCache {
  private readonly tokens = new Map<string, Cached>();
  private readonly keys = new Map<string, ReturnType<typeof importPKCS8>>();

  constructor(
    private readonly clock: Clock,
    private readonly refreshAfterSeconds = APNS_TOKEN_REFRESH_SECONDS,
  ) {}

  /** The current token for this key; signs a new one when there is none or it is `refreshAfterSeconds` old. */
  async token(key: ApnsSigningKey): Promise<string> {
    const id = cacheKey(key);
    const now = Math.floor(this.clock.now().getTime() / 1000);
    const cached = this.tokens.get(id);
    if (cached && now - cached.issuedAt < this.refreshAfterSeconds && now >= cached.issuedAt) return cached.jwt;
    const jwt = this.sign(key, now);
    this.tokens.set(id, { jwt, issuedAt: now });
    // A failed signing is not cached.
    jwt.catch(() => {
      if (this.tokens.get(id)?.jwt === jwt) this.tokens.delete(id);
    });
    return jwt;
  }

  /** Drops `jwt` (APNs said ExpiredProviderToken) unless another send has already replaced it. */
  async invalidate(key: ApnsSigningKey, jwt: string): Promise<void> {
    const id = cacheKey(key);
    const cached = this.tokens.get(id);
    if (cached && (await cached.jwt.catch(() => undefined)) === jwt && this.tokens.get(id) === cached) this.tokens.delete(id);
  }

  private async sign(key: ApnsSigningKey, iat: number): Promise<string> {
    const pemId = sha256(key.privateKey);
    let imported = this.keys.get(pemId);
    if (!imported) {
      imported = importPKCS8(key.privateKey, 'ES256');
      this.keys.set(pemId, imported);
      imported.catch(() => this.keys.delete(pemId));
    }
    return new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: key.keyId })
      .setIssuer(key.teamId)
      .setIssuedAt(iat)
      .sign(await imported);
  }
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const cacheKey = (key: ApnsSigningKey) => `${key.teamId}\n${key.keyId}\n${sha256(key.privateKey)}`;

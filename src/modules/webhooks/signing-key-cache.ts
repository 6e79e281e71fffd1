import type { Secrets } from '../../secrets.js';
import { type SigningKey, signingKey } from './signing.js';
import type { ClaimedDelivery } from './webhooks.repository.js';

interface CachedKeys {
  updatedAt: string;
  current: SigningKey;
  previous: SigningKey | null;
  previousUntil: number;
}

/** Entries kept at most; past it the cache starts over (endpoints are few next to deliveries). */
const MAX_ENDPOINTS = 10_000;

/**
 * An endpoint's secrets as signing keys, decrypted once per endpoint version (not per delivery):
 * a claim carries the endpoint's `updated_at`, and a rotation or an edit changes it.
 */
export class SigningKeyCache {
  private readonly keys = new Map<string, CachedKeys>();

  constructor(private readonly secrets: Secrets) {}

  /** The keys to sign with at `nowMs`: the current one, and the previous one while it overlaps. */
  keysFor(claim: ClaimedDelivery, nowMs: number): SigningKey[] {
    let cached = this.keys.get(claim.endpoint_id);
    if (!cached || cached.updatedAt !== claim.endpoint_updated_at) {
      cached = {
        updatedAt: claim.endpoint_updated_at,
        current: signingKey(this.secrets.decrypt(claim.secret_enc)),
        previous: claim.previous_secret_enc ? signingKey(this.secrets.decrypt(claim.previous_secret_enc)) : null,
        previousUntil: claim.previous_secret_until ? Date.parse(claim.previous_secret_until) : 0,
      };
      if (this.keys.size > MAX_ENDPOINTS) this.keys.clear();
      this.keys.set(claim.endpoint_id, cached);
    }
    return cached.previous && nowMs < cached.previousUntil ? [cached.current, cached.previous] : [cached.current];
  }
}

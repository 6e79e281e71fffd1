import type { Clock } from '../../clock.js';
import type { AuthContext } from './auth-context.js';

/**
 * API keys resolved recently, one per process (owned by the process's one AuthService, which
 * the services object builds): a key is looked up on every request and changes only when revoked. A revocation
 * in this process clears it at once (clear()); one made by another process takes effect here
 * within ttlMs. Keyed by the key itself, held in memory only and never logged: hashing it on
 * every request was a measurable share of POST /send.
 */
export class ApiKeyCache {
  private readonly entries = new Map<string, { auth: AuthContext; until: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs = 2000,
    private readonly max = 10_000,
  ) {}

  /** A copy of the context of a key resolved in the last ttlMs, else undefined. */
  get(key: string): AuthContext | undefined {
    const cached = this.entries.get(key);
    return cached && cached.until > this.clock.now().getTime() ? { ...cached.auth } : undefined;
  }

  set(key: string, auth: AuthContext): void {
    if (this.entries.size >= this.max) this.entries.clear();
    this.entries.set(key, { auth: { ...auth }, until: this.clock.now().getTime() + this.ttlMs });
  }

  /** Forgets every key (after a revocation). */
  clear(): void {
    this.entries.clear();
  }
}

import type { ApiKeyScope } from '../keys/api-key.js';

/** Who is calling, resolved once per request. */
export interface AuthContext {
  accountId: string;
  /** The environment (its clientId) the call acts in; null for a JWT without `envId`. */
  envId: string | null;
  via: 'apiKey' | 'basic' | 'jwt';
  /**
   * `account`: may manage the account and act in any of its environments (account-scope API
   * keys, JWTs); `environment`: acts only in `envId` (environment-scope keys, Basic credentials).
   */
  scope: ApiKeyScope;
  keyId?: string;
  subject?: string;
}

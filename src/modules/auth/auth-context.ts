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
  /**
   * The environment's public key (README: Public keys). AuthService.authenticate refuses it
   * unless the caller allows it (routes of permission `browser`, and the end-user routes, where
   * it acts for a user as the in-app client's clientId does: InappAuthenticator.actingFor).
   */
  publicKey?: true;
}

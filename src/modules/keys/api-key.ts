import type { Clock, Ids } from '../../clock.js';
import { randomToken, sha256Hex } from '../../secrets.js';
import type { ApiKeyRow } from './keys.repository.js';

/** Every secret key starts with this, so leaked keys are recognisable by secret scanners. */
export const API_KEY_PREFIX = 'clarion_sk_';

/** Public keys start with this: they are meant to be seen (in a web page), and say so. */
export const PUBLIC_KEY_PREFIX = 'clarion_pk_';

/**
 * `account`: manages every environment of the account, its keys and settings, and acts in its own
 * environment or the one named by `?envId=`. `environment`: acts only inside its own environment.
 */
export type ApiKeyScope = 'account' | 'environment';

/**
 * `secret`: server credentials. `public`: what a web page may hold, the environment's stand-in for
 * its clientId (README: Public keys): it acts only for an end user, as the in-app client does, and
 * reads only what a browser may (permission `browser`).
 */
export type ApiKeyType = 'secret' | 'public';

export const scopeOf = (row: Pick<ApiKeyRow, 'scope'>): ApiKeyScope => (row.scope === 'account' ? 'account' : 'environment');

export const keyTypeOf = (row: Pick<ApiKeyRow, 'key_type'>): ApiKeyType => (row.key_type === 'public' ? 'public' : 'secret');

/** Whether a bearer credential has the shape of one of our API keys (secret or public). */
export const isApiKey = (credential: string): boolean => credential.startsWith(API_KEY_PREFIX) || credential.startsWith(PUBLIC_KEY_PREFIX);

export function newApiKey(
  deps: { clock: Clock; ids: Ids },
  accountId: string,
  envId: string,
  name: string,
  scope: ApiKeyScope,
  keyType: ApiKeyType = 'secret',
): { row: ApiKeyRow; key: string } {
  const prefix = keyType === 'public' ? PUBLIC_KEY_PREFIX : API_KEY_PREFIX;
  const key = prefix + randomToken(32);
  const row: ApiKeyRow = {
    id: deps.ids.uuid(),
    account_id: accountId,
    env_id: envId,
    name,
    key_type: keyType,
    scope,
    key_hash: sha256Hex(key),
    // A public key is no secret (it sits in web pages): it is listed whole; a secret key masked.
    display: keyType === 'public' ? key : `${key.slice(0, prefix.length + 4)}...${key.slice(-4)}`,
    revoked: 0,
    created_at: deps.clock.now().toISOString(),
    last_used_at: null,
  };
  return { row, key };
}

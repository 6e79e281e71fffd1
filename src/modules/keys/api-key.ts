import type { Clock, Ids } from '../../clock.js';
import { randomToken, sha256Hex } from '../../secrets.js';
import type { ApiKeyRow } from './keys.repository.js';

/** Every secret key starts with this, so leaked keys are recognisable by secret scanners. */
export const API_KEY_PREFIX = 'clarion_sk_';

/**
 * `account`: manages every environment of the account, its keys and settings, and acts in its own
 * environment or the one named by `?envId=`. `environment`: acts only inside its own environment.
 */
export type ApiKeyScope = 'account' | 'environment';

export const scopeOf = (row: Pick<ApiKeyRow, 'scope'>): ApiKeyScope => (row.scope === 'account' ? 'account' : 'environment');

export function newApiKey(
  deps: { clock: Clock; ids: Ids },
  accountId: string,
  envId: string,
  name: string,
  scope: ApiKeyScope,
): { row: ApiKeyRow; key: string } {
  const key = API_KEY_PREFIX + randomToken(32);
  const row: ApiKeyRow = {
    id: deps.ids.uuid(),
    account_id: accountId,
    env_id: envId,
    name,
    key_type: 'secret',
    scope,
    key_hash: sha256Hex(key),
    display: `${key.slice(0, API_KEY_PREFIX.length + 4)}...${key.slice(-4)}`,
    revoked: 0,
    created_at: deps.clock.now().toISOString(),
    last_used_at: null,
  };
  return { row, key };
}

import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../errors.js';
import type { ApiKeyCache } from '../auth/api-key-cache.js';
import type { EnvironmentsRepository } from '../environments/environments.repository.js';
import { type ApiKeyScope, type ApiKeyType, keyTypeOf, newApiKey, scopeOf } from './api-key.js';
import type { ApiKeyRow, KeysRepository } from './keys.repository.js';

export interface ApiKeyView {
  id: string;
  /** A secret key masked (the full key is shown only once, at creation); a public key whole. */
  key: string;
  keyType: ApiKeyType;
  scope: ApiKeyScope;
  environmentId: string;
  accountId: string;
  name: string;
  revoked: boolean;
  createdAt: string;
  lastUsedAt?: string;
}

export interface CreatedApiKey {
  id: string;
  key: string;
  keyType: ApiKeyType;
  scope: ApiKeyScope;
  environmentId: string;
  name: string;
  createdAt: string;
}

function toView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    key: row.display,
    keyType: keyTypeOf(row),
    scope: scopeOf(row),
    environmentId: row.env_id,
    accountId: row.account_id,
    name: row.name,
    revoked: row.revoked === 1,
    createdAt: row.created_at,
    ...(row.last_used_at ? { lastUsedAt: row.last_used_at } : {}),
  };
}

export class KeysService {
  private readonly repo: KeysRepository;
  private readonly environments: EnvironmentsRepository;
  constructor(
    private readonly deps: Deps,
    repositories: { keys: KeysRepository; environments: EnvironmentsRepository },
    /** AuthService's cache of resolved keys, cleared on a revocation. */
    private readonly apiKeys: ApiKeyCache,
  ) {
    this.repo = repositories.keys;
    this.environments = repositories.environments;
  }

  async list(accountId: string): Promise<ApiKeyView[]> {
    return (await this.repo.listByAccount(accountId)).map(toView);
  }

  /** Only account-scope callers reach this (permission matrix: POST /keys is `account`). */
  async create(
    accountId: string,
    input: { name: string; keyType?: ApiKeyType; environmentId?: string; scope?: ApiKeyScope },
    callerEnvId: string | null,
  ): Promise<CreatedApiKey> {
    const keyType = input.keyType ?? 'secret';
    if (keyType === 'public' && input.scope === 'account') {
      throw invalid('A public key cannot have account scope: it acts only for end users of its one environment.', 'Leave scope out (or "environment") for a public key; use a secret key for account management.');
    }
    const envId = input.environmentId ?? callerEnvId;
    if (!envId) {
      throw new AppError('ENVIRONMENT_REQUIRED', 'Which environment should the key belong to?', 'Pass environmentId in the body, or envId in the query.');
    }
    const env = await this.environments.find(accountId, envId);
    if (!env) throw notFound('Environment', envId, 'List your environments with GET /environments.');
    const scope = input.scope ?? 'environment';
    const { row, key } = newApiKey(this.deps, accountId, envId, input.name, scope, keyType);
    await this.repo.insert(row);
    return { id: row.id, key, keyType, scope, environmentId: envId, name: row.name, createdAt: row.created_at };
  }

  async revoke(accountId: string, keyId: string): Promise<void> {
    if (!(await this.repo.revoke(accountId, keyId))) throw notFound('API key', keyId);
    this.apiKeys.clear();
  }
}

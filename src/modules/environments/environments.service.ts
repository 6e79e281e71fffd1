import { randomBytes } from 'node:crypto';
import type { Deps } from '../../deps.js';
import { notFound } from '../../errors.js';
import type { Channel } from '../../http/schemas.js';
import { randomToken } from '../../secrets.js';
import { type EnvironmentRow, EnvironmentsRepository } from './environments.repository.js';

export interface Environment {
  clientId: string;
  clientSecret: string;
  title: string;
  disableSending: Channel[];
  secureMode: boolean;
}

export interface EnvironmentPatch {
  title?: string;
  disableSending?: Channel[];
  secureMode?: boolean;
  resetSecret?: boolean;
}

export const newClientId = () => randomBytes(12).toString('hex');
export const newClientSecret = () => randomToken(32);

/** A new environment's row; `secureMode`: in-app clients must send the user hash (off unless asked). */
export function newEnvironmentRow(deps: Pick<Deps, 'clock' | 'secrets'>, accountId: string, title: string, clientSecret: string, secureMode = false): EnvironmentRow {
  const now = deps.clock.now().toISOString();
  return {
    client_id: newClientId(),
    account_id: accountId,
    title,
    client_secret_enc: deps.secrets.encrypt(clientSecret),
    disable_sending: '[]',
    secure_mode: secureMode ? 1 : 0,
    created_at: now,
    updated_at: now,
  };
}

export class EnvironmentsService {
  constructor(
    private readonly deps: Deps,
    private readonly repo = new EnvironmentsRepository(deps.db),
  ) {}

  toEnvironment(row: EnvironmentRow): Environment {
    return {
      clientId: row.client_id,
      clientSecret: this.deps.secrets.decrypt(row.client_secret_enc),
      title: row.title,
      disableSending: JSON.parse(row.disable_sending) as Channel[],
      secureMode: row.secure_mode === 1,
    };
  }

  async create(accountId: string, title: string): Promise<Environment> {
    const row = newEnvironmentRow(this.deps, accountId, title, newClientSecret());
    await this.repo.insert(row);
    return this.toEnvironment(row);
  }

  async list(accountId: string): Promise<Environment[]> {
    return (await this.repo.listByAccount(accountId)).map((row) => this.toEnvironment(row));
  }

  async get(accountId: string, clientId: string): Promise<Environment> {
    const row = await this.repo.find(accountId, clientId);
    if (!row) throw notFound('Environment', clientId, 'List your environments with GET /environments.');
    return this.toEnvironment(row);
  }

  async update(accountId: string, clientId: string, patch: EnvironmentPatch): Promise<Environment> {
    await this.get(accountId, clientId);
    await this.repo.update(accountId, clientId, {
      ...(patch.title !== undefined ? { title: patch.title } : {}),
      ...(patch.disableSending !== undefined ? { disable_sending: JSON.stringify([...new Set(patch.disableSending)]) } : {}),
      ...(patch.secureMode !== undefined ? { secure_mode: patch.secureMode ? 1 : 0 } : {}),
      ...(patch.resetSecret ? { client_secret_enc: this.deps.secrets.encrypt(newClientSecret()) } : {}),
      updated_at: this.deps.clock.now().toISOString(),
    });
    // Open in-app sockets were authenticated under the old rules. Also on a repeated
    // `secureMode: true`, so retrying a PATCH whose close failed still closes them.
    if (patch.secureMode === true || patch.resetSecret) await this.deps.inappRealtime.closeEnvironment(accountId, clientId);
    return this.get(accountId, clientId);
  }
}

import type { Deps } from '../../deps.js';
import { EnvironmentsRepository } from '../environments/environments.repository.js';
import { newClientSecret, newEnvironmentRow } from '../environments/environments.service.js';
import { KeysRepository } from '../keys/keys.repository.js';
import { newApiKey } from '../keys/api-key.js';
import { AccountsRepository } from './accounts.repository.js';
import { newAccountRow } from './accounts.service.js';

export interface CreatedAccount {
  accountId: string;
  clientId: string;
  clientSecret: string;
  apiKey: string;
}

/** A new account with one environment and its account-scope API key, written in one transaction. */
export async function createAccountWithEnvironment(
  deps: Deps,
  input: { name: string; environmentTitle?: string; creator?: string; /** The environment in secure mode (in-app clients must send the user hash). */ secureMode?: boolean },
): Promise<CreatedAccount> {
  const account = newAccountRow(deps, input.name, input.creator);
  const clientSecret = newClientSecret();
  const env = newEnvironmentRow(deps, account.id, input.environmentTitle ?? 'Development', clientSecret, input.secureMode ?? false);
  const { row: keyRow, key } = newApiKey(deps, account.id, env.client_id, 'bootstrap', 'account');
  await deps.db.transaction().execute(async (trx) => {
    await new AccountsRepository(trx).insert(account);
    await new EnvironmentsRepository(trx).insert(env);
    await new KeysRepository(trx).insert(keyRow);
  });
  return { accountId: account.id, clientId: env.client_id, clientSecret, apiKey: key };
}

/** Creates the first account when the database has none; returns it, or null when accounts exist. */
export async function bootstrapIfEmpty(deps: Deps): Promise<CreatedAccount | null> {
  if ((await new AccountsRepository(deps.db).count()) > 0) return null;
  return createAccountWithEnvironment(deps, { name: 'Default account' });
}

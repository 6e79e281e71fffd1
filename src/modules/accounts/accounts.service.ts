import type { Deps } from '../../deps.js';
import { AppError } from '../../errors.js';
import type { AccountRow, AccountsRepository } from './accounts.repository.js';

/** The latest billing version; an account created without one gets it (spec: Versioning). */
export const LATEST_BILLING_VERSION = 3;

/** The spec's Account record, plus `organizationId`, which the official SDK reads (one org per account here). */
export interface Account {
  accountId: string;
  organizationId: string;
  accountType: string;
  creator?: string;
  name: string;
  messagesCap: number;
  costCap: number;
  smsCap?: number;
  callCap?: number;
  billingVersion: number;
  anniversaryDate: string;
  createdAt: string;
  updatedAt: string;
  status: string;
  subscriptionStatus: string | null;
  autoUpgrade: boolean;
}

export function toAccount(row: AccountRow): Account {
  return {
    accountId: row.id,
    organizationId: row.id,
    accountType: row.account_type,
    ...(row.creator ? { creator: row.creator } : {}),
    name: row.name,
    messagesCap: row.messages_cap,
    costCap: row.cost_cap,
    ...(row.sms_cap !== null ? { smsCap: row.sms_cap } : {}),
    ...(row.call_cap !== null ? { callCap: row.call_cap } : {}),
    billingVersion: row.billing_version ?? LATEST_BILLING_VERSION,
    anniversaryDate: row.anniversary_date,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    status: row.status,
    subscriptionStatus: row.subscription_status,
    autoUpgrade: row.auto_upgrade === 1,
  };
}

export function newAccountRow(deps: Pick<Deps, 'clock' | 'ids' | 'config'>, name: string, creator?: string): AccountRow {
  const now = deps.clock.now();
  const iso = now.toISOString();
  return {
    id: deps.ids.uuid(),
    name,
    // Self-hosted: every account is on the free plan with the deployment's default cap.
    account_type: 'free',
    creator: creator ?? null,
    messages_cap: deps.config.defaultMessagesCap,
    cost_cap: 0,
    sms_cap: null,
    call_cap: null,
    billing_version: LATEST_BILLING_VERSION,
    // The billing cycle resets on the day of the month the account was created.
    anniversary_date: iso.slice(0, 10),
    status: 'verified',
    subscription_status: null,
    auto_upgrade: 0,
    created_at: iso,
    updated_at: iso,
  };
}

export class AccountsService {
  constructor(
    private readonly deps: Deps,
    private readonly repo: AccountsRepository,
  ) {}

  async get(accountId: string): Promise<Account> {
    const row = await this.repo.find(accountId);
    if (!row) throw new AppError('UNAUTHORIZED', 'The account of these credentials no longer exists.');
    return toAccount(row);
  }

  async update(accountId: string, patch: { name?: string; autoUpgrade?: boolean }): Promise<Account> {
    if (patch.autoUpgrade !== undefined || patch.name !== undefined) {
      await this.repo.updateSettings(accountId, patch, this.deps.clock.now().toISOString());
    }
    return this.get(accountId);
  }
}

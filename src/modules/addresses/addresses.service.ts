import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { DOMAIN_NAME, type DomainsService } from '../domains/domains.service.js';
import type { AddressesRepository } from './addresses.repository.js';
import { isUniqueViolation } from '../../storage/errors.js';
import type { EmailAddressRow } from './addresses.tables.js';

/** The pingram SDK's AccountAddressesResponseAddressesInner. */
export interface AddressView {
  fullAddress: string;
  prefix: string;
  domain: string;
  type: 'builtin' | 'custom';
  displayName?: string;
  createdAt: string;
}

export interface CreateAddressInput {
  prefix: string;
  domain?: string;
  displayName?: string;
}

export interface UpdateAddressInput {
  fullAddress: string;
  prefix?: string;
  displayName?: string;
}

/**
 * A prefix is the local part of a dot-atom address (RFC 5322 3.2.3) restricted to what every
 * mail system accepts: letters, digits, '.', '_', '+', '-', not starting or ending with a dot
 * nor with two dots in a row; stored lower case (the SMTP server matches recipients that way).
 */
const PREFIX = /^[a-z0-9_+-](?:[a-z0-9_+.-]{0,62}[a-z0-9_+-])?$/;
const MAX_DISPLAY_NAME = 128;

export function addressView(row: EmailAddressRow): AddressView {
  return {
    fullAddress: row.full_address,
    prefix: row.prefix,
    domain: row.domain,
    type: row.type,
    ...(row.display_name ? { displayName: row.display_name } : {}),
    createdAt: row.created_at,
  };
}

/**
 * Inbound addresses of an environment (the pingram SDK's AddressesApi). A built-in address is
 * `prefix@<CLARION_INBOUND_DOMAIN>`; a custom one needs a domain verified for the account
 * (modules/domains), whose MX then points at this server. Built-in addresses cannot be deleted.
 */
export class AddressesService {
  constructor(
    private readonly deps: Pick<Deps, 'config' | 'clock'>,
    private readonly repo: AddressesRepository,
    private readonly domains: Pick<DomainsService, 'isVerified'>,
  ) {}

  async list(scope: EnvScope): Promise<AddressView[]> {
    return (await this.repo.list(scope)).map(addressView);
  }

  async create(scope: EnvScope, input: CreateAddressInput): Promise<AddressView> {
    const prefix = checkPrefix(input.prefix);
    const displayName = checkDisplayName(input.displayName);
    const mailDomain = this.deps.config.inboundDomain;
    const domain = input.domain === undefined ? mailDomain : input.domain.trim().toLowerCase();
    const custom = domain !== mailDomain;
    if (custom) {
      if (!DOMAIN_NAME.test(domain)) throw invalid(`domain "${input.domain}" is not a domain name.`, `Leave domain out for a built-in address on ${mailDomain}.`);
      if (!(await this.domains.isVerified(scope.accountId, domain))) {
        throw invalid(
          `domain "${domain}" is not verified for this account: custom addresses need a verified sender domain.`,
          `Add it with POST /domains {"sender": "${domain}"} and publish the records it answers, or leave domain out for a built-in address (${prefix}@${mailDomain}).`,
        );
      }
    }
    const now = this.deps.clock.now().toISOString();
    const row: EmailAddressRow = {
      full_address: `${prefix}@${domain}`,
      account_id: scope.accountId,
      env_id: scope.envId,
      prefix,
      domain,
      type: custom ? 'custom' : 'builtin',
      display_name: displayName ?? null,
      created_at: now,
      updated_at: now,
    };
    try {
      await this.repo.insert(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw taken(row.full_address);
      throw err;
    }
    return addressView(row);
  }

  async update(scope: EnvScope, input: UpdateAddressInput): Promise<AddressView> {
    const fullAddress = input.fullAddress.trim().toLowerCase();
    const row = await this.repo.find(scope, fullAddress);
    if (!row) throw notFound('Address', input.fullAddress, 'GET /addresses lists the addresses of this environment.');
    const prefix = input.prefix === undefined ? row.prefix : checkPrefix(input.prefix);
    const displayName = input.displayName === undefined ? row.display_name : (checkDisplayName(input.displayName) ?? null);
    const next = { ...row, prefix, full_address: `${prefix}@${row.domain}`, display_name: displayName, updated_at: this.deps.clock.now().toISOString() };
    try {
      const changed = await this.repo.update(scope, fullAddress, { full_address: next.full_address, prefix, display_name: displayName, updated_at: next.updated_at });
      if (!changed) throw notFound('Address', input.fullAddress);
    } catch (err) {
      if (isUniqueViolation(err)) throw taken(next.full_address);
      throw err;
    }
    return addressView(next);
  }

  async delete(scope: EnvScope, fullAddress: string): Promise<void> {
    const key = fullAddress.trim().toLowerCase();
    const row = await this.repo.find(scope, key);
    if (!row) throw notFound('Address', fullAddress, 'GET /addresses lists the addresses of this environment.');
    if (row.type === 'builtin') {
      throw invalid(`${row.full_address} is a built-in address; built-in addresses cannot be deleted.`, 'Only custom addresses (on a verified domain) can be deleted.');
    }
    await this.repo.delete(scope, key);
  }
}

function checkPrefix(raw: string): string {
  const prefix = raw.trim().toLowerCase();
  if (!PREFIX.test(prefix) || prefix.includes('..')) {
    throw invalid(
      `prefix "${raw}" is not a valid address prefix.`,
      "Use 1 to 64 letters, digits, '.', '_', '+' or '-', not starting or ending with '.' (e.g. support).",
    );
  }
  return prefix;
}

function checkDisplayName(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const name = raw.trim();
  if (name.length > MAX_DISPLAY_NAME || /[\r\n\0]/.test(name)) throw invalid(`displayName must be at most ${MAX_DISPLAY_NAME} characters on one line.`);
  return name || undefined;
}

const taken = (fullAddress: string) => new AppError('CONFLICT', `The address ${fullAddress} is already taken.`, 'Choose another prefix.');

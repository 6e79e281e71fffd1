import { generateKeyPair, randomBytes } from 'node:crypto';
import { domainToASCII } from 'node:url';
import { promisify } from 'node:util';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { isUniqueViolation } from '../../storage/errors.js';
import { type DnsRecord, type DnsRecordChecker, type RecordStatus, recordStatusOf, recordsFor, returnPathDomainOf } from './dns-records.js';
import type { DomainsRepository } from './domains.repository.js';
import type { DomainStatus, MailFromStatus, SenderDomainRow } from './domains.tables.js';

const generateRsa = promisify(generateKeyPair);

/** A record to publish, with what the last check found. */
export interface DnsRecordView {
  type: DnsRecord['type'];
  name: string;
  value: string;
  purpose: DnsRecord['kind'];
  required: boolean;
  status: RecordStatus | 'unchecked';
}

/**
 * The pingram SDK's GetSendersResponseInner without `privateDKIMKey` (the private key never
 * leaves the server: it signs mail here, and whoever reads it could sign mail as the domain),
 * plus `dnsRecords`, the records to publish (the SDK's model ignores fields it does not know).
 */
export interface DomainView {
  sender: string;
  status: DomainStatus;
  lastSync: string;
  verificationTokens: string[];
  mailFromDomainStatus: MailFromStatus;
  createdAt: string;
  selector: string;
  dnsRecords: DnsRecordView[];
}

/** A verified domain's signing key, as the email channel takes it. */
export interface DomainSigningKey {
  domainName: string;
  keySelector: string;
  /** PKCS#8 PEM. */
  privateKey: string;
  /**
   * The envelope sender's domain (`bounces.<domain>`), once its return-path CNAME was found: mail
   * then leaves with MAIL FROM on it, so SPF passes aligned with the From domain. Without the
   * record the envelope keeps the From address: a MAIL FROM domain that does not resolve is
   * refused by many receivers.
   */
  returnPathDomain?: string;
}

const HOUR_MS = 3600_000;
/** Records missing this long after the domain was added turn PENDING into FAILED (DNS changes take up to 72 hours). */
const PENDING_MS = 72 * HOUR_MS;
/** Next periodic check: verified and failed domains daily, the others hourly. */
const RECHECK_MS: Record<DomainStatus, number> = { SUCCESS: 24 * HOUR_MS, FAILED: 24 * HOUR_MS, PENDING: HOUR_MS, TEMPORARY_FAILURE: HOUR_MS, NOT_STARTED: 0 };
const MAX_DOMAINS = 100;
/** Domains the periodic job checks per run; the rest are due at the next run. */
const CHECKS_PER_RUN = 500;
/** Domains checked at once by the job: a DNS outage (each lookup timing out) must not make a run last hours. */
const CHECK_CONCURRENCY = 8;
/** A DNS name of two labels or more, lower case ASCII (IDNA applied first). */
export const DOMAIN_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;

const tooManyDomains = () => invalid(`This account has ${MAX_DOMAINS} sender domains, the most it may have.`, 'Delete a domain you no longer send from (DELETE /domains/{sender}).');

/**
 * Sender domains of an account (the pingram SDK's DomainsApi). A domain belongs to the account:
 * every environment sends from it. Adding one makes an RSA-2048 DKIM key pair (the private key
 * sealed with the server's secret key), a selector and a verification token, and answers the
 * records to publish; verification looks them up on add, on POST /domains/{sender}/verify and
 * periodically (domains.jobs.ts). Mail from a verified domain is DKIM-signed; mail from any other
 * address than the platform default sender is refused (senderKeys, checkFromAddress).
 */
export class DomainsService {
  constructor(
    private readonly deps: Pick<Deps, 'config' | 'clock' | 'secrets' | 'logger'>,
    private readonly repo: DomainsRepository,
    private readonly dns: DnsRecordChecker,
  ) {}

  async list(accountId: string): Promise<DomainView[]> {
    return (await this.repo.list(accountId)).map((row) => this.view(row));
  }

  /** Adds the domain of `sender` (a domain, or an address whose domain is taken), checks it, and answers every domain of the account. Adding it again checks it again. */
  async add(accountId: string, sender: string): Promise<DomainView[]> {
    const domain = senderDomain(sender);
    let row = await this.repo.find(accountId, domain);
    if (!row) {
      // Checked first to spare a key generation, and again where the row is written (a concurrent add).
      if ((await this.repo.list(accountId)).length >= MAX_DOMAINS) throw tooManyDomains();
      row = await this.create(accountId, domain);
    }
    await this.check(row);
    return this.list(accountId);
  }

  async delete(accountId: string, sender: string): Promise<void> {
    const domain = senderDomain(sender);
    if (!(await this.repo.delete(accountId, domain))) throw unknownDomain(domain);
  }

  /** Checks the domain's records now; answers the domain as it stands after the check. */
  async verify(accountId: string, sender: string): Promise<DomainView> {
    const domain = senderDomain(sender);
    const row = await this.repo.find(accountId, domain);
    if (!row) throw unknownDomain(domain);
    return this.view(await this.check(row));
  }

  /** The periodic job: checks every domain whose next check is due. Answers how many were checked. */
  async checkDue(): Promise<number> {
    const due = await this.repo.due(this.deps.clock.now().toISOString(), CHECKS_PER_RUN);
    let next = 0;
    const lane = async () => {
      while (next < due.length) {
        const row = due[next++];
        try {
          await this.check(row);
        } catch (err) {
          this.deps.logger.warn({ err, domain: row.domain }, 'sender domain check failed');
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CHECK_CONCURRENCY, due.length) }, lane));
    return due.length;
  }

  /**
   * The signing keys of the account's verified domains, by domain: the email executor reads it once
   * per batch. A domain whose records could not be looked up since it was verified
   * (TEMPORARY_FAILURE) keeps signing: a DNS outage must not stop mail.
   */
  async senderKeys(accountId: string): Promise<Map<string, DomainSigningKey>> {
    const keys = new Map<string, DomainSigningKey>();
    for (const row of await this.repo.sendable(accountId)) {
      const returnPathFound = recordStatusOf(row.record_status).returnPath === 'found';
      keys.set(row.domain, {
        domainName: row.domain,
        keySelector: row.selector,
        privateKey: this.deps.secrets.decrypt(row.dkim_private_key_enc),
        ...(returnPathFound ? { returnPathDomain: returnPathDomainOf(row.domain) } : {}),
      });
    }
    return keys;
  }

  /** Is `domain` (lower case) a verified domain of the account (custom inbound addresses need one). */
  async isVerified(accountId: string, domain: string): Promise<boolean> {
    const row = await this.repo.find(accountId, domain);
    return !!row?.verified_at;
  }

  /** Is mail from `address` allowed: the platform default sender, or an address on one of `verified`. */
  isAllowedSender(address: string, verified: { has(domain: string): boolean }): boolean {
    const lower = address.trim().toLowerCase();
    if (lower === this.deps.config.defaultFromAddress.toLowerCase()) return true;
    return verified.has(lower.slice(lower.lastIndexOf('@') + 1));
  }

  /**
   * Refuses (400, VALIDATION_FAILED unless `code` says otherwise: broadcasts answer
   * UNVERIFIED_DOMAIN) a `fromAddress` that is neither the platform default sender nor on a
   * verified domain of the account: the rule of broadcasts and of POST /send.
   */
  async checkFromAddress(accountId: string, address: string, field = 'fromAddress', code: 'VALIDATION_FAILED' | 'UNVERIFIED_DOMAIN' = 'VALIDATION_FAILED'): Promise<void> {
    const lower = address.trim().toLowerCase();
    if (lower === this.deps.config.defaultFromAddress.toLowerCase()) return;
    const verified = new Set((await this.repo.sendable(accountId)).map((r) => r.domain));
    if (this.isAllowedSender(lower, verified)) return;
    throw unverifiedSender(field, address, this.deps.config.defaultFromAddress, code);
  }

  private async create(accountId: string, domain: string): Promise<SenderDomainRow> {
    const { publicKey, privateKey } = await generateRsa('rsa', { modulusLength: 2048 });
    const now = this.deps.clock.now().toISOString();
    const row: SenderDomainRow = {
      account_id: accountId,
      domain,
      selector: `clarion${randomBytes(4).toString('hex')}`,
      dkim_public_key: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
      dkim_private_key_enc: this.deps.secrets.encrypt(privateKey.export({ type: 'pkcs8', format: 'pem' }) as string),
      verification_token: randomBytes(24).toString('base64url'),
      status: 'NOT_STARTED',
      mail_from_status: 'PENDING',
      record_status: '{}',
      verified_at: null,
      last_sync: now,
      next_check_at: now,
      created_at: now,
      updated_at: now,
    };
    try {
      if (!(await this.repo.insertUnderLimit(row, MAX_DOMAINS))) throw tooManyDomains();
      return row;
    } catch (err) {
      // Added by a concurrent request: theirs stands.
      const existing = isUniqueViolation(err) ? await this.repo.find(accountId, domain) : undefined;
      if (existing) return existing;
      throw err;
    }
  }

  /** Looks the domain's records up and records the outcome (statuses, lastSync, next check). */
  private async check(row: SenderDomainRow): Promise<SenderDomainRow> {
    const records = this.records(row);
    const found = await Promise.all(records.map((r) => this.dns.check(r)));
    const now = this.deps.clock.now();
    const expired = now.getTime() - Date.parse(row.created_at) >= PENDING_MS;
    const outcome = (required: boolean, wasVerified: boolean): MailFromStatus => {
      const mine = found.filter((_, i) => records[i].required === required);
      if (mine.every((s) => s === 'found')) return 'SUCCESS';
      if (mine.includes('error')) return 'TEMPORARY_FAILURE';
      // Records removed after verification fail at once; a new domain has 72 hours to publish.
      return wasVerified || expired ? 'FAILED' : 'PENDING';
    };
    const status = outcome(true, row.verified_at !== null);
    const verifiedAt = status === 'SUCCESS' ? (row.verified_at ?? now.toISOString()) : status === 'TEMPORARY_FAILURE' ? row.verified_at : null;
    const patch = {
      status,
      mail_from_status: outcome(false, false),
      record_status: JSON.stringify(Object.fromEntries(records.map((r, i) => [r.kind, found[i]]))),
      verified_at: verifiedAt,
      last_sync: now.toISOString(),
      next_check_at: new Date(now.getTime() + RECHECK_MS[status]).toISOString(),
      updated_at: now.toISOString(),
    };
    await this.repo.recordCheck(row.account_id, row.domain, patch);
    return { ...row, ...patch };
  }

  private records(row: SenderDomainRow): DnsRecord[] {
    return recordsFor(row.domain, row.selector, row.dkim_public_key, row.verification_token, this.deps.config.sendingDomain);
  }

  private view(row: SenderDomainRow): DomainView {
    const checked = recordStatusOf(row.record_status);
    return {
      sender: row.domain,
      status: row.status,
      lastSync: row.last_sync,
      verificationTokens: [row.verification_token],
      mailFromDomainStatus: row.mail_from_status,
      createdAt: row.created_at,
      selector: row.selector,
      dnsRecords: this.records(row).map((r) => ({ type: r.type, name: r.name, value: r.value, purpose: r.kind, required: r.required, status: checked[r.kind] ?? 'unchecked' })),
    };
  }
}

/** The domain a `sender` names: a domain name, or the domain of an email address; lower case, ASCII (IDNA). */
export function senderDomain(sender: string): string {
  const raw = sender.trim();
  const at = raw.lastIndexOf('@');
  const name = (at >= 0 ? raw.slice(at + 1) : raw).replace(/\.$/, '');
  const ascii = domainToASCII(name.toLowerCase());
  if (!ascii || !DOMAIN_NAME.test(ascii) || at === 0) {
    throw invalid(`sender "${sender}" is not a domain name or an email address.`, 'Send the domain you send mail from, e.g. {"sender": "example.com"} (or an address on it, e.g. "news@example.com").');
  }
  // No top-level domain is all digits (RFC 3696, 2): such a name is an IPv4 address, whose DNS
  // records (DKIM, SPF, verification) could never be published.
  if (/^\d+$/.test(ascii.slice(ascii.lastIndexOf('.') + 1))) {
    throw invalid(`sender "${sender}" is an IP address, not a domain name.`, 'Send the domain you send mail from, e.g. {"sender": "example.com"}.');
  }
  return ascii;
}

const unknownDomain = (domain: string) =>
  new AppError('NOT_FOUND', `The sender domain "${domain}" is not a domain of this account.`, 'GET /domains lists the domains of this account; POST /domains {"sender": "..."} adds one.');

export function unverifiedSender(field: string, address: string, defaultFrom: string, code: 'VALIDATION_FAILED' | 'UNVERIFIED_DOMAIN' = 'VALIDATION_FAILED'): AppError {
  const domain = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
  return new AppError(
    code,
    `${field} "${address}" is neither the platform default sender (${defaultFrom}) nor on a verified domain of this account: ${domain} is not verified.`,
    `Add it with POST /domains {"sender": "${domain}"} and publish the records it answers, then send from it once GET /domains shows it SUCCESS; or ${code === 'UNVERIFIED_DOMAIN' ? `use ${defaultFrom} (for testing: at most 10 recipients)` : `leave ${field} out to send from ${defaultFrom}`}.`,
  );
}

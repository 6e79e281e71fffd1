import { Resolver } from 'node:dns/promises';

/** One DNS record the owner of a domain publishes for Clarion. */
export interface DnsRecord {
  kind: 'dkim' | 'verification' | 'spf' | 'returnPath';
  type: 'TXT' | 'CNAME';
  name: string;
  value: string;
  /** Needed for the domain to be verified (SUCCESS); the others make up mailFromDomainStatus. */
  required: boolean;
}

/** What a lookup found: the record as published, none (NXDOMAIN, no data, another value), or no answer (SERVFAIL, timeout, refused). */
export type RecordStatus = 'found' | 'missing' | 'error';

/** The envelope sender's (MAIL FROM) domain of mail from `domain`: the name of its return-path CNAME. */
export const returnPathDomainOf = (domain: string): string => `bounces.${domain}`;

/** What each record was found to be at the last check, by kind (`{}` before the first). */
export const recordStatusOf = (stored: string): Partial<Record<DnsRecord['kind'], RecordStatus>> => JSON.parse(stored) as Partial<Record<DnsRecord['kind'], RecordStatus>>;

/** What Clarion asks a domain's owner to publish (docs/domains.md). */
export function recordsFor(domain: string, selector: string, publicKey: string, token: string, sendingDomain: string): DnsRecord[] {
  return [
    { kind: 'dkim', type: 'TXT', name: `${selector}._domainkey.${domain}`, value: `v=DKIM1; k=rsa; p=${publicKey}`, required: true },
    { kind: 'verification', type: 'TXT', name: `_clarion.${domain}`, value: `clarion-verification=${token}`, required: true },
    { kind: 'spf', type: 'TXT', name: domain, value: `v=spf1 include:_spf.${sendingDomain} ~all`, required: false },
    { kind: 'returnPath', type: 'CNAME', name: returnPathDomainOf(domain), value: returnPathDomainOf(sendingDomain), required: false },
  ];
}

/** DKIM tag list (RFC 6376 3.2) as a map; tag names are case-sensitive, whitespace is folded away. */
function dkimTags(txt: string): Map<string, string> {
  const tags = new Map<string, string>();
  for (const part of txt.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    tags.set(part.slice(0, eq).trim(), part.slice(eq + 1).replace(/\s+/g, ''));
  }
  return tags;
}

/** Does a published value stand for the record? Each kind is compared the way receivers read it. */
export function matches(record: DnsRecord, published: string): boolean {
  switch (record.kind) {
    case 'dkim': {
      // A receiver reads the key (p=) and the key type; other tags (t=, n=) may differ.
      const want = dkimTags(record.value);
      const got = dkimTags(published);
      return got.get('p') === want.get('p') && (got.get('k') ?? 'rsa') === 'rsa' && (got.get('v') ?? 'DKIM1') === 'DKIM1';
    }
    case 'verification':
      return published.trim() === record.value;
    case 'spf': {
      // The domain's one SPF record must include ours; it may list other senders too.
      const include = record.value.split(' ')[1];
      const words = published.trim().toLowerCase().split(/\s+/);
      return words[0] === 'v=spf1' && words.some((w) => w.replace(/^[+?~-]/, '') === include.toLowerCase());
    }
    case 'returnPath':
      return published.replace(/\.$/, '').toLowerCase() === record.value.toLowerCase();
  }
}

/** DNS answers that mean "the name or the record is not there", as opposed to "no answer". */
const ABSENT = new Set(['ENOTFOUND', 'ENODATA', 'ENONAME']);

/**
 * Looks records up through node's DNS resolver (c-ares): the system's resolvers, or the one at
 * CLARION_DNS_SERVER. Every lookup is fresh (c-ares keeps no cache), so a record just published
 * is seen at once, as far as the resolver's own cache allows.
 */
export class DnsRecordChecker {
  private readonly resolver: Resolver;

  constructor(options: { server?: string; timeoutMs?: number; tries?: number } = {}) {
    this.resolver = new Resolver({ timeout: options.timeoutMs ?? 3000, tries: options.tries ?? 2 });
    if (options.server) this.resolver.setServers([options.server]);
  }

  async check(record: DnsRecord): Promise<RecordStatus> {
    try {
      const values = record.type === 'TXT' ? (await this.resolver.resolveTxt(record.name)).map((chunks) => chunks.join('')) : await this.resolver.resolveCname(record.name);
      return values.some((v) => matches(record, v)) ? 'found' : 'missing';
    } catch (err) {
      return ABSENT.has((err as NodeJS.ErrnoException).code ?? '') ? 'missing' : 'error';
    }
  }
}

import type { App } from '../../src/http/types.js';
import type { DnsTestServer } from './dns-server.js';

/** A record of a domain as POST /domains answers it. */
export interface PublishedRecord {
  type: 'TXT' | 'CNAME';
  name: string;
  value: string;
  purpose: string;
  required: boolean;
  status: string;
}

/** Publishes a domain's records on the test DNS server, as its owner would in their zone. */
export function publishRecords(dns: DnsTestServer, records: PublishedRecord[], only?: (r: PublishedRecord) => boolean): void {
  for (const r of records.filter(only ?? (() => true))) {
    if (r.type === 'TXT') dns.publishTxt(r.name, r.value);
    else dns.publishCname(r.name, r.value);
  }
}

/**
 * Adds `domain` to the account of `auth` (an account-scope credential), publishes every record it
 * answers on `dns`, and verifies it: the way a user makes a sender domain usable. Answers the
 * domain as POST /domains/{sender}/verify answered it (status SUCCESS).
 */
export async function verifySenderDomain(app: App, auth: Record<string, string>, dns: DnsTestServer, domain: string): Promise<{ status: string; selector: string; dnsRecords: PublishedRecord[] }> {
  const added = await app.inject({ method: 'POST', url: '/domains', headers: auth, payload: { sender: domain } });
  if (added.statusCode !== 200) throw new Error(`POST /domains answered ${added.statusCode}: ${added.body}`);
  const entry = added.json<{ sender: string; dnsRecords: PublishedRecord[] }[]>().find((d) => d.sender === domain)!;
  publishRecords(dns, entry.dnsRecords);
  const verified = await app.inject({ method: 'POST', url: `/domains/${encodeURIComponent(domain)}/verify`, headers: auth });
  const body = verified.json<{ status: string; selector: string; dnsRecords: PublishedRecord[] }>();
  if (body.status !== 'SUCCESS') throw new Error(`${domain} did not verify: ${verified.body}`);
  return body;
}

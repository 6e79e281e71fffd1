// Sender-domain DNS: CLARION_DNS_SERVER and CLARION_SENDING_DOMAIN parsing, how each published
// value is matched, and the lookup outcomes against a real DNS server on loopback (a server that
// never answers is a timeout, told apart from a missing record).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { DnsRecordChecker, matches, recordsFor } from '../../src/modules/domains/dns-records.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';

describe('CLARION_DNS_SERVER and CLARION_SENDING_DOMAIN', () => {
  it('takes an IP with an optional port, and defaults the sending domain to the default sender', () => {
    expect(loadConfig({}).dnsServer).toBeUndefined();
    expect(loadConfig({ CLARION_DNS_SERVER: '127.0.0.1:5353' }).dnsServer).toBe('127.0.0.1:5353');
    expect(loadConfig({ CLARION_DNS_SERVER: '[::1]:53' }).dnsServer).toBe('[::1]:53');
    expect(loadConfig({ CLARION_DNS_SERVER: '9.9.9.9' }).dnsServer).toBe('9.9.9.9');
    for (const bad of ['dns.example.com:53', '127.0.0.1:70000', '300.1.1.1', 'localhost']) {
      expect(() => loadConfig({ CLARION_DNS_SERVER: bad })).toThrow(ConfigError);
    }
    expect(loadConfig({ CLARION_DEFAULT_FROM_ADDRESS: 'noreply@Mail.Example.com' }).sendingDomain).toBe('mail.example.com');
    expect(loadConfig({ CLARION_SENDING_DOMAIN: 'out.example.net' }).sendingDomain).toBe('out.example.net');
    expect(() => loadConfig({ CLARION_SENDING_DOMAIN: 'not a domain' })).toThrow(/CLARION_SENDING_DOMAIN must be a domain name/);
  });
});

describe('published values', () => {
  const [dkim, verification, spf, returnPath] = recordsFor('example.com', 'sel', 'MIIBIjAN', 'tok', 'mail.clarion.test');
  it('reads each record the way receivers do', () => {
    expect(matches(dkim, 'v=DKIM1; k=rsa; p=MIIBIjAN')).toBe(true);
    expect(matches(dkim, 'v=DKIM1;k=rsa;t=s; p=MIIB IjAN')).toBe(true);
    expect(matches(dkim, 'v=DKIM1; k=rsa; p=OTHER')).toBe(false);
    expect(matches(dkim, 'v=DKIM1; k=ed25519; p=MIIBIjAN')).toBe(false);
    expect(matches(verification, 'clarion-verification=tok')).toBe(true);
    expect(matches(verification, 'clarion-verification=other')).toBe(false);
    expect(matches(spf, 'v=spf1 mx include:_spf.mail.clarion.test -all')).toBe(true);
    expect(matches(spf, 'v=spf1 include:_spf.other.test ~all')).toBe(false);
    expect(matches(spf, 'include:_spf.mail.clarion.test')).toBe(false);
    expect(matches(returnPath, 'bounces.mail.clarion.test.')).toBe(true);
    expect(matches(returnPath, 'elsewhere.test')).toBe(false);
  });
});

describe('DnsRecordChecker against a loopback DNS server', () => {
  let dns: DnsTestServer;
  let checker: DnsRecordChecker;
  const [dkim, verification, , returnPath] = recordsFor('example.com', 'sel', 'A'.repeat(392), 'tok', 'mail.clarion.test');
  beforeAll(async () => {
    dns = await startDnsServer();
    checker = new DnsRecordChecker({ server: dns.address, timeoutMs: 200, tries: 1 });
  });
  afterAll(() => dns.close());

  it('found, missing (NXDOMAIN, no data, another value), and error (SERVFAIL, no answer at all)', async () => {
    expect(await checker.check(dkim)).toBe('missing');
    // A 2048-bit key is longer than one TXT string: it is published as several, read joined.
    dns.publishTxt(dkim.name, dkim.value);
    expect(await checker.check(dkim)).toBe('found');
    dns.publishCname(verification.name, 'somewhere.test');
    expect(await checker.check(verification)).toBe('missing');
    dns.publishCname(returnPath.name, 'bounces.mail.clarion.test');
    expect(await checker.check(returnPath)).toBe('found');
    dns.servfail(dkim.name);
    expect(await checker.check(dkim)).toBe('error');
    dns.servfail(dkim.name, false);
    dns.silent(dkim.name);
    expect(await checker.check(dkim)).toBe('error');
    dns.silent(dkim.name, false);
    expect(await checker.check(dkim)).toBe('found');
  });
});

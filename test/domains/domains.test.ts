// Sender domains (the pingram SDK's DomainsApi) against a real DNS server on loopback: the records
// answered on add, verification on add / on demand / by the hourly job (injected clock), the
// statuses a lookup leads to, Error bodies, isolation between accounts, and custom inbound
// addresses on a verified domain receiving mail over SMTP.
import { createPublicKey } from 'node:crypto';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InboundSmtpServer } from '../../src/modules/addresses/inbound-smtp.js';
import { DomainsRepository } from '../../src/modules/domains/domains.repository.js';
import { type TestContext, ManualClock, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { type PublishedRecord, publishRecords } from '../helpers/sender-domains.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const HOUR = 3600_000;

describe.each(STORAGE_KINDS)('sender domains (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  const clock = new ManualClock(new Date('2026-03-02T08:00:00.000Z'));
  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, headers: Record<string, string> = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  const expectError = (res: { statusCode: number; json(): unknown }, status: number, code: string, message: RegExp) => {
    const body = expectErrorBody(res, status, code, message);
    expect(body.error.fix).toBeTruthy();
    return body;
  };
  type Domain = { sender: string; status: string; lastSync: string; selector: string; mailFromDomainStatus: string; verificationTokens: string[]; dnsRecords: PublishedRecord[] };
  const add = async (sender: string, headers = t.auth) => {
    const res = await call('POST', '/domains', { sender }, headers);
    expect(res.statusCode).toBe(200);
    return res.json<Domain[]>();
  };
  const verify = async (sender: string) => {
    const res = await call('POST', `/domains/${encodeURIComponent(sender)}/verify`);
    expect(res.statusCode).toBe(200);
    return res.json<Domain>();
  };
  const record = (d: Domain, purpose: string) => d.dnsRecords.find((r) => r.purpose === purpose)!;

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(kind, { clock, workers: true, config: { dnsServer: dns.address, sendingDomain: 'mail.clarion.test' } });
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it('adds a domain with a new DKIM key and answers the records to publish (SDK shape, no private key)', async () => {
    const list = await add('News@Example.TEST');
    expect(list).toHaveLength(1);
    const [domain] = list;
    expect(domain).toMatchObject({ sender: 'example.test', status: 'PENDING', mailFromDomainStatus: 'PENDING', lastSync: clock.now().toISOString(), createdAt: clock.now().toISOString() });
    expect(domain).not.toHaveProperty('privateDKIMKey');
    expect(JSON.stringify(list)).not.toMatch(/PRIVATE KEY/);
    expect(domain.selector).toMatch(/^clarion[0-9a-f]{8}$/);
    expect(domain.verificationTokens).toHaveLength(1);

    const dkim = record(domain, 'dkim');
    expect(dkim).toMatchObject({ type: 'TXT', name: `${domain.selector}._domainkey.example.test`, required: true, status: 'missing' });
    const p = /^v=DKIM1; k=rsa; p=([A-Za-z0-9+/=]+)$/.exec(dkim.value)![1];
    const key = createPublicKey({ key: Buffer.from(p, 'base64'), format: 'der', type: 'spki' });
    expect(key.asymmetricKeyType).toBe('rsa');
    expect(key.asymmetricKeyDetails?.modulusLength).toBe(2048);
    expect(record(domain, 'verification')).toMatchObject({ type: 'TXT', name: '_clarion.example.test', value: `clarion-verification=${domain.verificationTokens[0]}`, required: true });
    expect(record(domain, 'spf')).toMatchObject({ type: 'TXT', name: 'example.test', value: 'v=spf1 include:_spf.mail.clarion.test ~all', required: false });
    expect(record(domain, 'returnPath')).toMatchObject({ type: 'CNAME', name: 'bounces.example.test', value: 'bounces.mail.clarion.test', required: false });
    // The check on add asked the DNS server for each record.
    expect(dns.queries).toEqual(expect.arrayContaining([`TXT ${dkim.name}`, 'TXT _clarion.example.test', 'TXT example.test', 'CNAME bounces.example.test']));

    // The private key is stored sealed, not in clear.
    const row = (await t.deps.db.selectFrom('sender_domains' as never).selectAll().executeTakeFirstOrThrow()) as Record<string, string>;
    expect(row.dkim_private_key_enc).toMatch(/^v1\./);
    expect(t.deps.secrets.decrypt(row.dkim_private_key_enc)).toMatch(/BEGIN PRIVATE KEY/);

    // Adding it again changes nothing (same key and selector) and checks it again.
    clock.advance(60_000);
    const again = await add('example.test');
    expect(again).toHaveLength(1);
    expect(again[0]).toMatchObject({ selector: domain.selector, verificationTokens: domain.verificationTokens, lastSync: clock.now().toISOString() });
    expect((await call('GET', '/domains')).json()).toEqual(again);
  });

  it('verifies once the required records are published; SPF and return path make mailFromDomainStatus', async () => {
    const [domain] = await add('example.test');
    expect((await verify('example.test')).status).toBe('PENDING');
    publishRecords(dns, domain.dnsRecords, (r) => r.purpose === 'dkim');
    expect((await verify('example.test')).status).toBe('PENDING');
    // A wrong verification value is not the record.
    dns.publishTxt('_clarion.example.test', 'clarion-verification=somebody-else');
    expect(record(await verify('example.test'), 'verification').status).toBe('missing');
    publishRecords(dns, domain.dnsRecords, (r) => r.purpose === 'verification');
    clock.advance(1000);
    const verified = await verify('example.test');
    expect(verified).toMatchObject({ status: 'SUCCESS', mailFromDomainStatus: 'PENDING', lastSync: clock.now().toISOString() });
    // The domain's SPF record may list other senders; ours must be included.
    dns.publishTxt('example.test', 'v=spf1 include:_spf.google.com include:_spf.mail.clarion.test ~all');
    publishRecords(dns, domain.dnsRecords, (r) => r.purpose === 'returnPath');
    const complete = await verify('example.test');
    expect(complete).toMatchObject({ status: 'SUCCESS', mailFromDomainStatus: 'SUCCESS' });
    expect(complete.dnsRecords.map((r) => r.status)).toEqual(['found', 'found', 'found', 'found']);
    expect((await t.services.domains.senderKeys(t.account.accountId)).get('example.test')?.keySelector).toBe(domain.selector);
  });

  it('a lookup without an answer (SERVFAIL) is TEMPORARY_FAILURE and keeps a verified domain sending; removed records fail it', async () => {
    const [domain] = (await add('example.test')).filter((d) => d.sender === 'example.test');
    const dkimName = record(domain, 'dkim').name;
    dns.servfail(dkimName);
    const failing = await verify('example.test');
    expect(failing.status).toBe('TEMPORARY_FAILURE');
    expect(record(failing, 'dkim').status).toBe('error');
    expect((await t.services.domains.senderKeys(t.account.accountId)).has('example.test')).toBe(true);
    dns.servfail(dkimName, false);
    expect((await verify('example.test')).status).toBe('SUCCESS');

    dns.remove(dkimName);
    expect((await verify('example.test')).status).toBe('FAILED');
    expect((await t.services.domains.senderKeys(t.account.accountId)).has('example.test')).toBe(false);
    publishRecords(dns, domain.dnsRecords, (r) => r.purpose === 'dkim');
    expect((await verify('example.test')).status).toBe('SUCCESS');
  });

  it('a domain never published turns FAILED after 72 hours', async () => {
    await add('late.example.test');
    clock.advance(71 * HOUR);
    expect((await verify('late.example.test')).status).toBe('PENDING');
    clock.advance(2 * HOUR);
    expect((await verify('late.example.test')).status).toBe('FAILED');
    await call('DELETE', '/domains/late.example.test');
  });

  it('the hourly job checks the domains that are due, once across schedulers, with the injected clock', async () => {
    const [added] = (await add('hourly.example.test')).filter((d) => d.sender === 'hourly.example.test');
    expect(added.status).toBe('PENDING');
    publishRecords(dns, added.dnsRecords);
    const dkimQuestion = `TXT ${record(added, 'dkim').name}`;
    const asked = () => dns.queries.filter((q) => q === dkimQuestion).length;

    // Not due yet (checked on add, next check in an hour): a run leaves it alone.
    const before = asked();
    await t.services.domains.checkDue();
    expect(asked()).toBe(before);
    expect((await call('GET', '/domains')).json().find((d: Domain) => d.sender === 'hourly.example.test').status).toBe('PENDING');

    // An hour later it is due: every process schedules the same hour's job, which runs once.
    clock.advance(HOUR);
    const [a, b] = await Promise.all([t.workers!.scheduleDomainChecks(), t.workers!.scheduleDomainChecks()]);
    expect(a).toBe(b);
    const checked = await eventually(async () => {
      const d = ((await call('GET', '/domains')).json<Domain[]>()).find((x) => x.sender === 'hourly.example.test')!;
      return d.status === 'SUCCESS' ? d : undefined;
    }, 10_000, 'the periodic check');
    expect(checked.lastSync).toBe(clock.now().toISOString());
    expect(asked()).toBe(before + 1);
  });

  it('refuses a bad sender, an unknown domain and environment credentials with the Error body', async () => {
    expectError(await call('POST', '/domains', { sender: 'not a domain' }), 400, 'VALIDATION_FAILED', /sender "not a domain" is not a domain name or an email address/);
    expectError(await call('POST', '/domains', { sender: 'localhost' }), 400, 'VALIDATION_FAILED', /not a domain name/);
    expectError(await call('POST', '/domains', { sender: '@example.org' }), 400, 'VALIDATION_FAILED', /not a domain name/);
    expectError(await call('POST', '/domains', { sender: '1.2.3.4' }), 400, 'VALIDATION_FAILED', /sender "1\.2\.3\.4" is an IP address, not a domain name/);
    expectError(await call('POST', '/domains', { sender: 'news@10.0.0.1' }), 400, 'VALIDATION_FAILED', /is an IP address/);
    expect((await call('GET', '/domains')).json<{ sender: string }[]>().map((d) => d.sender)).not.toContain('1.2.3.4');
    expectError(await call('POST', '/domains', {}), 400, 'VALIDATION_FAILED', /sender/);
    expectError(await call('POST', '/domains/unknown.example.org/verify'), 404, 'NOT_FOUND', /"unknown.example.org" is not a domain of this account/);
    expectError(await call('DELETE', '/domains/unknown.example.org'), 404, 'NOT_FOUND', /not a domain of this account/);
    // Domains are the account's: environment credentials may list them, not change them.
    const basic = { authorization: `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}`).toString('base64')}` };
    expect((await call('GET', '/domains', undefined, basic)).statusCode).toBe(200);
    expect((await call('POST', '/domains', { sender: 'x.example.org' }, basic)).statusCode).toBe(403);
  });

  it('holds the limit of 100 domains against concurrent adds', async () => {
    const full = await t.newAccount('Full');
    const auth = { authorization: `Bearer ${full.apiKey}` };
    // 99 rows written directly: a key generation per add would make the test minutes long.
    const repo = new DomainsRepository(t.deps.db);
    const now = clock.now().toISOString();
    for (let i = 0; i < 99; i++) {
      await repo.insert({ account_id: full.accountId, domain: `d${i}.seeded.test`, selector: 's', dkim_public_key: 'k', dkim_private_key_enc: 'x', verification_token: 't', status: 'NOT_STARTED', mail_from_status: 'PENDING', record_status: '{}', verified_at: null, last_sync: now, next_check_at: '9999-01-01T00:00:00.000Z', created_at: now, updated_at: now });
    }
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => call('POST', '/domains', { sender: `over${i}.example.test` }, auth)));
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 400, 400, 400, 400, 400]);
    for (const refused of answers.filter((a) => a.statusCode === 400)) expectError(refused, 400, 'VALIDATION_FAILED', /100 sender domains, the most it may have/);
    expect(await repo.list(full.accountId)).toHaveLength(100);
  });

  it('another account never sees, verifies, deletes nor sends from the domain', async () => {
    const other = await t.newAccount('Other');
    const auth = { authorization: `Bearer ${other.apiKey}` };
    expect((await call('GET', '/domains', undefined, auth)).json()).toEqual([]);
    expect((await call('POST', '/domains/example.test/verify', undefined, auth)).statusCode).toBe(404);
    expect((await call('DELETE', '/domains/example.test', undefined, auth)).statusCode).toBe(404);
    expect((await t.services.domains.senderKeys(other.accountId)).size).toBe(0);
    await expect(t.services.domains.checkFromAddress(other.accountId, 'news@example.test')).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect((await call('POST', '/addresses', { prefix: 'help', domain: 'example.test' }, auth)).statusCode).toBe(400);
    // The same name claimed by the other account is its own domain, with its own key, unverified.
    const theirs = (await add('example.test', auth))[0];
    expect(theirs.status).toBe('PENDING');
    expect(theirs.selector).not.toBe(((await call('GET', '/domains')).json<Domain[]>()).find((d) => d.sender === 'example.test')!.selector);
    expect((await call('DELETE', '/domains/example.test', undefined, auth)).json()).toEqual({ success: true });
    expect(((await call('GET', '/domains')).json<Domain[]>()).some((d) => d.sender === 'example.test')).toBe(true);
  });

  it('checkFromAddress (the broadcasts rule): the default sender and verified domains pass, others are refused with a fix', async () => {
    const { accountId } = t.account;
    await expect(t.services.domains.checkFromAddress(accountId, t.deps.config.defaultFromAddress.toUpperCase())).resolves.toBeUndefined();
    await expect(t.services.domains.checkFromAddress(accountId, 'Team@Example.test')).resolves.toBeUndefined();
    const refused = await t.services.domains.checkFromAddress(accountId, 'team@unverified.example.org').catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'VALIDATION_FAILED', status: 400 });
    expect((refused as Error).message).toMatch(/fromAddress "team@unverified.example.org" is neither the platform default sender .* unverified.example.org is not verified/);
    expect((refused as { fix: string }).fix).toMatch(/POST \/domains \{"sender": "unverified.example.org"\} and publish the records/);
  });

  it('custom inbound addresses need a verified domain of the account', async () => {
    const created = await call('POST', '/addresses', { prefix: 'Support', domain: 'Example.test', displayName: 'Support' });
    expect(created.statusCode).toBe(200);
    expect(created.json().address).toMatchObject({ fullAddress: 'support@example.test', domain: 'example.test', type: 'custom', displayName: 'Support' });
    // The inbound SMTP server takes mail for it over a real SMTP conversation.
    const server = await new InboundSmtpServer(t.services.inbound, t.deps.logger, { port: 0, host: '127.0.0.1', maxBytes: 64 * 1024 }).listen();
    const mta = nodemailer.createTransport({ host: '127.0.0.1', port: server.port, secure: false, ignoreTLS: true });
    try {
      const info = await mta.sendMail({ from: 'customer@example.org', to: 'Support@example.test', subject: 'Help please', text: 'It broke.' });
      expect(info.accepted).toEqual(['Support@example.test']);
      await expect(mta.sendMail({ from: 'customer@example.org', to: 'nobody@example.test', subject: 'x', text: 'x' })).rejects.toMatchObject({ responseCode: 550 });
      // The domain fails its check (its DKIM record is gone): the address stops receiving at RCPT, and again once the record is back.
      const published = (await verify('example.test')).dnsRecords;
      dns.remove(record({ dnsRecords: published } as Domain, 'dkim').name);
      expect((await verify('example.test')).status).toBe('FAILED');
      await expect(mta.sendMail({ from: 'customer@example.org', to: 'support@example.test', subject: 'Lost?', text: 'x' })).rejects.toMatchObject({ responseCode: 550 });
      publishRecords(dns, published, (r) => r.purpose === 'dkim');
      expect((await verify('example.test')).status).toBe('SUCCESS');
      expect((await mta.sendMail({ from: 'customer@example.org', to: 'support@example.test', subject: 'Back', text: 'x' })).accepted).toEqual(['support@example.test']);
    } finally {
      mta.close();
      await server.close();
    }
    const inbox = (await call('GET', '/inbound-emails?address=support@example.test')).json();
    type Inbound = { fields: { email_inbound_subject: string } };
    expect(inbox.emails.map((e: Inbound) => e.fields.email_inbound_subject).sort()).toEqual(['Back', 'Help please']);
    expect(inbox.emails.find((e: Inbound) => e.fields.email_inbound_subject === 'Help please').fields).toMatchObject({ email_inbound_subject: 'Help please', email_inbound_from: 'customer@example.org' });
    await add('pending.example.test');
    expectError(await call('POST', '/addresses', { prefix: 'x', domain: 'pending.example.test' }), 400, 'VALIDATION_FAILED', /not verified for this account/);
    expect((await call('DELETE', '/addresses/support@example.test')).statusCode).toBe(200);
  });
});

// Mail from a verified sender domain is DKIM-signed, and an independent verifier (mailauth's
// dkimVerify, reading the public key from the loopback DNS server the domain's records were
// published on) accepts the signature of what arrived over real SMTP and of what the local outbox
// kept. Altering the body or List-Unsubscribe breaks it. Other senders are refused or fail.
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { type PublishedRecord, publishRecords, verifySenderDomain } from '../helpers/sender-domains.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('DKIM signing of mail from verified domains (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  let smtp: SmtpPeer;
  let resolver: Resolver;
  /** The verifier's DNS: the same loopback server, through a resolver of its own. */
  const verifyDkim = (raw: Buffer | string) => dkimVerify(typeof raw === 'string' ? Buffer.from(raw) : raw, { resolver: (name: string, type: string) => resolver.resolve(name, type as 'TXT') });
  const send = (payload: object, headers: Record<string, string> = t.auth) => t.app.inject({ method: 'POST', url: '/send', headers, payload });
  const log = async (trackingId: string, envId?: string) =>
    (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}${envId ? `?envId=${envId}` : ''}`, headers: t.auth })).json().logs[0];

  beforeAll(async () => {
    dns = await startDnsServer();
    resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([dns.address]);
    smtp = await startSmtpPeer();
    // No SMTP_URL: the home environment sends through its own SMTP setting, others keep mail in the local outbox.
    t = await createTestContext(kind, { workers: true, config: { allowPrivateNetworks: true, dnsServer: dns.address, publicUrl: 'https://clarion.example.test' } });
    const setting = await t.app.inject({ method: 'PUT', url: '/settings/email/smtp', headers: t.auth, payload: { url: smtp.url } });
    expect(setting.statusCode).toBeLessThan(300);
    await verifySenderDomain(t.app, t.auth, dns, 'news.example.test');
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
    await dns?.close();
  });

  it('signs mail from the verified domain sent over SMTP; the signature covers List-Unsubscribe and breaks when it or the body changes', async () => {
    const res = await send({
      type: 'digest',
      to: { id: 'ada', email: 'ada@example.com' },
      email: { subject: 'Your digest', html: '<p>Three new things</p>' },
      options: { email: { fromAddress: 'Digest@News.Example.test', fromName: 'News' } },
    });
    expect(res.statusCode).toBe(200);
    const [mail] = await smtp.waitFor(1);
    expect(mail.parsed.from?.value[0].address?.toLowerCase()).toBe('digest@news.example.test');
    // The return-path CNAME is published: bounces go to the domain's return-path name, one address per delivery.
    expect(mail.envelope.from).toMatch(/^bounce-[0-9a-f-]{36}@bounces\.news\.example\.test$/);
    expect(mail.envelope.to).toEqual(['ada@example.com']);

    const result = await verifyDkim(mail.raw);
    expect(result.results).toHaveLength(1);
    const [sig] = result.results;
    expect(sig.status.result).toBe('pass');
    expect(sig.signingDomain).toBe('news.example.test');
    expect(sig.status.aligned).toBe('news.example.test');
    const header = mail.raw.toString('latin1').split(/\r\n\r\n/)[0].replace(/\r\n[ \t]+/g, ' ');
    const h = /DKIM-Signature:[^\r\n]*\bh=([^;]+)/i.exec(header)![1].replace(/\s+/g, '').toLowerCase().split(':');
    expect(h).toEqual(expect.arrayContaining(['from', 'to', 'subject', 'date', 'message-id', 'list-unsubscribe', 'list-unsubscribe-post']));

    // Altered body: the body hash no longer matches.
    const raw = mail.raw.toString('latin1');
    const alteredBody = raw.replace('Three new things', 'Four new things');
    expect(alteredBody).not.toBe(raw);
    // mailauth reports a body hash mismatch as neutral with this comment (not a pass either way).
    expect((await verifyDkim(Buffer.from(alteredBody, 'latin1'))).results[0].status).toMatchObject({ result: 'neutral', comment: 'body hash did not verify' });
    // Altered List-Unsubscribe (a phishing target): the header signature no longer matches.
    const alteredHeader = raw.replace(/(\nList-Unsubscribe:\s*<https:\/\/)clarion\.example\.test/, '$1evil.example.test');
    expect(alteredHeader).not.toBe(raw);
    expect((await verifyDkim(Buffer.from(alteredHeader, 'latin1'))).results[0].status.result).toBe('fail');
  });

  it('keeps the From address as envelope sender while the return-path CNAME is not published', async () => {
    smtp.messages.length = 0;
    const added = await t.app.inject({ method: 'POST', url: '/domains', headers: t.auth, payload: { sender: 'plain.example.test' } });
    const records = added.json<{ sender: string; dnsRecords: PublishedRecord[] }[]>().find((d) => d.sender === 'plain.example.test')!.dnsRecords;
    publishRecords(dns, records, (r) => r.purpose !== 'returnPath');
    const verified = await t.app.inject({ method: 'POST', url: '/domains/plain.example.test/verify', headers: t.auth });
    expect(verified.json().status).toBe('SUCCESS');
    const res = await send({
      type: 'digest',
      to: { id: 'ada', email: 'ada@example.com' },
      email: { subject: 'No return path', html: '<p>x</p>' },
      options: { email: { fromAddress: 'hello@plain.example.test', ccAddresses: ['cc@example.com'] } },
    });
    expect(res.statusCode).toBe(200);
    const [mail] = await smtp.waitFor(1);
    expect(mail.envelope.from).toBe('hello@plain.example.test');
    expect(mail.envelope.to.sort()).toEqual(['ada@example.com', 'cc@example.com']);
    expect((await verifyDkim(mail.raw)).results[0].status.result).toBe('pass');
  });

  it('signs what the local outbox keeps, for an environment without an SMTP server', async () => {
    // A second environment of the same account: domains are the account's.
    const env = await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'outbox' } });
    expect(env.statusCode).toBeLessThan(300);
    const clientId = env.json().clientId as string;
    const sent = await t.app.inject({ method: 'POST', url: `/send?envId=${clientId}`, headers: t.auth, payload: {
      type: 'alert',
      to: { id: 'bob', email: 'bob@example.com' },
      email: { subject: 'Kept here', html: '<p>outbox body</p>' },
      options: { email: { fromAddress: 'alerts@news.example.test' } },
    } });
    expect(sent.statusCode).toBe(200);
    await eventually(async () => (await log(sent.json().trackingId, clientId))?.email_sent_at, 15_000, 'kept in the outbox');
    const list = await t.app.inject({ method: 'GET', url: `/outbox?envId=${clientId}`, headers: t.auth });
    const id = list.json().messages[0].id as string;
    const raw = await t.app.inject({ method: 'GET', url: `/outbox/${id}/raw?envId=${clientId}`, headers: t.auth });
    expect(raw.statusCode).toBe(200);
    const result = await verifyDkim(raw.rawPayload);
    expect(result.results[0].status.result).toBe('pass');
    expect(result.results[0].signingDomain).toBe('news.example.test');
  });

  it('mail from the default sender is not signed; a named sender off the verified domains is refused at /send, a template one fails UNVERIFIED_SENDER', async () => {
    smtp.messages.length = 0;
    const plain = await send({ type: 'plain', to: { id: 'cy', email: 'cy@example.com' }, email: { subject: 'Default sender', html: '<p>hi</p>' } });
    expect(plain.statusCode).toBe(200);
    const [mail] = await smtp.waitFor(1);
    expect(mail.raw.toString('latin1')).not.toMatch(/^DKIM-Signature:/im);
    expect(mail.parsed.from?.value[0].address).toBe(t.deps.config.defaultFromAddress);

    const refused = await send({ type: 'plain', to: { id: 'cy', email: 'cy@example.com' }, email: { subject: 'x', html: '<p>x</p>' }, options: { email: { fromAddress: 'ceo@unverified.example.org' } } });
    expect(refused.statusCode).toBe(400);
    const body = refused.json();
    expect(body.trackingId).toBeTruthy();
    expect(body.error).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(body.error.message).toMatch(/options\.email\.fromAddress "ceo@unverified\.example\.org" is neither the platform default sender .*unverified\.example\.org is not verified/);
    expect(body.error.fix).toMatch(/POST \/domains \{"sender": "unverified\.example\.org"\} and publish the records/);
    expect((await send({ type: 'plain', to: { id: 'cy', email: 'cy@example.com' }, email: { subject: 'x', html: '<p>x</p>', senderEmail: 'a@unverified.example.org' } })).statusCode).toBe(400);

    // A stored template's sender is known only at delivery: the email fails for good, nothing is sent.
    const tpl = await t.app.inject({
      method: 'POST',
      url: '/notifications/spoof/EMAIL/templates',
      headers: t.auth,
      payload: { templateId: 'main', subject: 'Spoof', html: '<p>spoof</p>', senderEmail: 'ceo@unverified.example.org', senderName: 'CEO' },
    });
    expect(tpl.statusCode).toBeLessThan(300);
    const before = smtp.messages.length;
    const queued = await send({ type: 'spoof', to: { id: 'cy', email: 'cy@example.com' } });
    expect(queued.statusCode).toBe(200);
    const record = await eventually(async () => {
      const r = await log(queued.json().trackingId);
      return r?.email_failed_at ? r : undefined;
    }, 15_000, 'email_failed_at');
    expect(record.email_failed_code).toBe('UNVERIFIED_SENDER');
    expect(record.email_failed_internal).toMatch(/ceo@unverified\.example\.org is neither the platform default sender nor on a verified domain/);
    expect(smtp.messages.length).toBe(before);
  });
});

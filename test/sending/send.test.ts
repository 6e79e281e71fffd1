import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { verifySenderDomain } from '../helpers/sender-domains.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { countAcceptedSends } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('send: email and in-app end to end (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let dns: DnsTestServer;
  const send = (payload: unknown, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url: '/send', headers: { ...t.auth, ...headers }, payload: payload as object });
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] ? log(trackingId) : undefined), 15_000, field);

  beforeAll(async () => {
    smtp = await startSmtpPeer({ reject: { 'bounce@example.com': 550, 'later@example.com': 451 } });
    dns = await startDnsServer();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true, dnsServer: dns.address } });
    // The senders below (team@, digest@clarion.test) are on a domain verified for the account, as mail must be.
    await verifySenderDomain(t.app, t.auth, dns, 'clarion.test');
  });
  afterAll(async () => {
    await t.close();
    await smtp.close();
    await dns.close();
  });
  beforeEach(() => {
    smtp.messages.length = 0;
  });

  it('delivers inline email over SMTP and in-app, and the log tells each step', async () => {
    const res = await send({
      type: 'welcome',
      to: { id: 'ada', email: 'ada@example.com' },
      parameters: { name: 'Ada <Lovelace>', plan: 'pro' },
      email: { subject: 'Hi {{ name }}', html: '<p>Hello {{ name }}, plan {{ plan | upcase }}</p>', previewText: 'Your {{ plan }} plan', senderName: 'Team', senderEmail: 'team@clarion.test' },
      inapp: { title: 'Welcome {{ name }}', url: 'https://app.example.com/welcome' },
      options: { email: { replyToAddresses: ['help@clarion.test'], ccAddresses: ['cc@example.com'] } },
    });
    expect(res.statusCode).toBe(200);
    const { trackingId, messages } = res.json();
    expect(messages).toEqual([]);

    const [mail] = await smtp.waitFor(1);
    expect(mail.parsed.subject).toBe('Hi Ada <Lovelace>');
    expect(mail.parsed.from?.value[0]).toEqual({ address: 'team@clarion.test', name: 'Team' });
    expect(mail.parsed.replyTo?.value[0].address).toBe('help@clarion.test');
    expect(mail.envelope.to.sort()).toEqual(['ada@example.com', 'cc@example.com']);
    expect(mail.parsed.html).toContain('Hello Ada &lt;Lovelace&gt;, plan PRO');
    expect(mail.parsed.html).toContain('Your pro plan');
    expect(mail.parsed.text).toContain('Hello Ada <Lovelace>, plan PRO');

    const record = await settled(trackingId, 'email_sent_at');
    expect(record).toMatchObject({
      trackingId,
      accountId: t.account.accountId,
      envId: t.account.clientId,
      type: 'welcome',
      user_id: 'ada',
      user_email: 'ada@example.com',
      email_routing: 'SEND',
      inapp_routing: 'SEND',
      email_preview: 'Hi Ada <Lovelace>',
      inapp_preview: 'Welcome Ada <Lovelace>',
      sms_routing: 'SKIP',
      sms_routing_reason: 'NO_CONTENT',
    });
    expect(record.email_sent_message_id).toBe(mail.parsed.messageId);
    expect(record.email_sent_after).toBeGreaterThanOrEqual(0);
    expect(record.processed_at >= record.received_at).toBe(true);
    await settled(trackingId, 'inapp_delivered_at');

    const attempts = await t.deps.db.selectFrom('delivery_attempts' as never).selectAll().execute();
    expect(attempts.length).toBeGreaterThanOrEqual(2);
  });

  it('renders stored templates with components, warns on an unknown templateId, and fails only the channel on a render error', async () => {
    const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, headers: t.auth, payload });
    expect((await post('/components', { componentId: 'footer', name: 'Footer', html: '<footer>Bye {{ user.email }}</footer>' })).statusCode).toBeLessThan(300);
    const tpl = await post('/notifications/digest/EMAIL/templates', {
      templateId: 'weekly',
      subject: 'Digest for {{ name }}',
      html: "<p>{% for item in items %}<i>{{ item }}</i>{% endfor %}</p>{% component 'footer' %}",
      senderName: 'Digest Bot',
      senderEmail: 'digest@clarion.test',
    });
    expect(tpl.statusCode).toBeLessThan(300);

    const res = await send({ type: 'digest', to: { id: 'tpl-user', email: 'tpl@example.com' }, parameters: { name: 'Tpl', items: ['a', 'b<c>'] }, templateId: 'nope' });
    expect(res.statusCode).toBe(202);
    expect(res.json().messages).toEqual([expect.stringContaining('nope')]);
    const [mail] = await smtp.waitFor(1);
    expect(mail.parsed.subject).toBe('Digest for Tpl');
    expect(mail.parsed.from?.value[0]).toEqual({ address: 'digest@clarion.test', name: 'Digest Bot' });
    expect(mail.parsed.html).toContain('<i>a</i><i>b&lt;c&gt;</i>');
    expect(mail.parsed.html).toContain('<footer>Bye tpl@example.com</footer>');

    // An inline template that cannot render (unknown filter) fails the email channel only.
    const broken = await send({
      type: 'broken',
      to: { id: 'tpl-user' },
      email: { subject: 'x', html: '{{ name | no_such_filter }}' },
      inapp: { title: 'still delivered' },
    });
    expect(broken.statusCode).toBe(200);
    const record = await settled(broken.json().trackingId, 'inapp_delivered_at');
    expect(record.email_failed_code).toBe('TEMPLATE_RENDER_FAILED');
    expect(record.email_routing).toBe('SEND');
  });

  it('records why a channel was not used', async () => {
    await t.app.inject({ method: 'PATCH', url: `/environments/${t.account.clientId}`, headers: t.auth, payload: { disableSending: ['INAPP_WEB'] } });
    try {
      const { trackingId } = (
        await send({ type: 'routing', to: { id: 'no-mail' }, email: { subject: 's', html: 'h' }, inapp: { title: 't' }, sms: { message: 'x' } })
      ).json();
      const record = await settled(trackingId, 'processed_at');
      expect(record).toMatchObject({
        email_routing: 'SKIP',
        email_routing_reason: 'NO_EMAIL',
        inapp_routing: 'SKIP',
        inapp_routing_reason: 'DISABLED_FOR_ENVIRONMENT',
        sms_routing: 'SKIP',
        sms_routing_reason: 'NO_NUMBER',
      });
      expect(smtp.messages).toHaveLength(0);
    } finally {
      await t.app.inject({ method: 'PATCH', url: `/environments/${t.account.clientId}`, headers: t.auth, payload: { disableSending: [] } });
    }
  });

  it('narrows channels with forceChannels', async () => {
    const { trackingId } = (
      await send({ type: 'forced', to: { id: 'f1', email: 'f1@example.com' }, forceChannels: ['INAPP_WEB'], email: { subject: 's', html: 'h' }, inapp: { title: 't' } })
    ).json();
    const record = await settled(trackingId, 'inapp_sent_at');
    expect(record.email_routing).toBe('SKIP');
    expect(record.email_routing_reason).toBe('NOT_IN_FORCE_CHANNELS');
  });

  it('hard-bounces on SMTP 550: the user is suppressed until the suppression is removed', async () => {
    const first = (await send({ type: 'bounce', to: { id: 'b1', email: 'bounce@example.com' }, email: { subject: 's', html: 'h' } })).json();
    const record = await settled(first.trackingId, 'email_failed_at');
    expect(record.email_failed_code).toBeDefined();
    expect(record.email_failed_recipient).toBe('bounce@example.com');
    expect(String(record.email_failed_diagnostic_code)).toMatch(/^550/);

    const user = await eventually(async () => {
      const u = (await t.app.inject({ method: 'GET', url: '/users/b1', headers: t.auth })).json();
      return u.emailSuppressionStatus ? u : undefined;
    });
    expect(user.emailSuppressionStatus.reason).toBe('Bounce');

    const second = (await send({ type: 'bounce', to: { id: 'b1' }, email: { subject: 's', html: 'h' } })).json();
    expect((await settled(second.trackingId, 'processed_at')).email_routing_reason).toBe('USER_SUPPRESSED');

    const removed = await t.app.inject({ method: 'DELETE', url: '/user_suppression/b1/channel/EMAIL', headers: t.auth });
    expect(removed.statusCode).toBe(200);
    expect(removed.json().user.emailSuppressionStatus).toBeUndefined();
    const third = (await send({ type: 'bounce', to: { id: 'b1' }, email: { subject: 's', html: 'h' } })).json();
    expect((await settled(third.trackingId, 'processed_at')).email_routing).toBe('SEND');
  });

  it('retries SMTP 4xx with backoff and records every attempt', async () => {
    const { trackingId } = (await send({ type: 'later', to: { id: 'l1', email: 'later@example.com' }, email: { subject: 's', html: 'h' } })).json();
    const record = await settled(trackingId, 'email_failed_at');
    expect(String(record.email_failed_diagnostic_code ?? record.email_failed_internal)).toMatch(/451|4\./);
    const { rows: attempts } = await sql<{ outcome: string }>`
      select a.outcome from delivery_attempts a join deliveries d on d.id = a.delivery_id
      where d.tracking_id = ${trackingId} order by a.attempt`.execute(t.deps.db);
    expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'retry', 'retry', 'retry', 'retry', 'failed']);
  });

  it('answers the same trackingId for a repeated Idempotency-Key and delivers once', async () => {
    const body = { type: 'idem', to: { id: 'i1', email: 'i1@example.com' }, email: { subject: 'once', html: 'h' } };
    const a = await send(body, { 'idempotency-key': 'order-42' });
    const b = await send(body, { 'idempotency-key': 'order-42' });
    expect(a.statusCode).toBe(200);
    expect(b.json().trackingId).toBe(a.json().trackingId);
    const other = await send({ ...body, email: { subject: 'changed', html: 'h' } }, { 'idempotency-key': 'order-42' });
    expect(other.statusCode).toBe(409);
    expect(other.json().error.code).toBe('IDEMPOTENCY_CONFLICT');
    // The same body rebuilt in another key order is the same request.
    const reordered = await send({ email: { html: 'h', subject: 'once' }, to: { email: 'i1@example.com', id: 'i1' }, type: 'idem' }, { 'idempotency-key': 'order-42' });
    expect([reordered.statusCode, reordered.json().trackingId]).toEqual([200, a.json().trackingId]);
    // A key stored by an earlier version holds the hash of the body as sent: a retry within its window still replays.
    const legacy = { type: 'idem', to: { id: 'i2' }, inapp: { title: 'legacy' } };
    const first = await send(legacy, { 'idempotency-key': 'order-43' });
    await t.deps.db
      .withTables<{ idempotency_keys: { key: string; request_hash: string } }>()
      .updateTable('idempotency_keys')
      .set({ request_hash: createHash('sha256').update(JSON.stringify(legacy)).digest('hex') })
      .where('key', '=', 'order-43')
      .execute();
    expect((await send(legacy, { 'idempotency-key': 'order-43' })).json().trackingId).toBe(first.json().trackingId);
    expect((await send({ ...legacy, inapp: { title: 'changed' } }, { 'idempotency-key': 'order-43' })).statusCode).toBe(409);
    await settled(a.json().trackingId, 'email_sent_at');
    expect(smtp.messages.filter((m) => m.parsed.subject === 'once')).toHaveLength(1);
  });

  it('validates the request before accepting anything', async () => {
    const cases: [unknown, number, string][] = [
      [{ to: { id: 'x' }, email: { subject: 's', html: 'h' } }, 400, 'VALIDATION_FAILED'],
      [{ type: 't', email: { subject: 's', html: 'h' } }, 400, 'VALIDATION_FAILED'],
      [{ type: 't', to: {}, email: { subject: 's', html: 'h' } }, 400, 'VALIDATION_FAILED'],
      [{ type: 't', to: { id: 'x' }, schedule: 'tomorrow' }, 400, 'VALIDATION_FAILED'],
      [{ type: 't', to: { id: 'x' }, schedule: new Date(Date.now() + 400 * 86400_000).toISOString() }, 400, 'VALIDATION_FAILED'],
      [{ type: 't', to: { id: 'x' }, forceChannels: ['FAX'] }, 400, 'VALIDATION_FAILED'],
      [{ type: 't', to: { id: 'x' }, email: { subject: 's' } }, 400, 'VALIDATION_FAILED'],
      [{ type: 't', to: { id: 'x', email: 'not-an-email' } }, 400, 'VALIDATION_FAILED'],
      [
        { type: 't', to: { id: 'x' }, email: { subject: 's', html: 'h' }, options: { email: { attachments: [{ filename: 'big.bin', content: Buffer.alloc(4_500_000).toString('base64') }] } } },
        413,
        'ATTACHMENT_TOO_LARGE',
      ],
    ];
    const before = await countAcceptedSends(t.deps);
    for (const [payload, status, code] of cases) {
      const res = await send(payload);
      expect(res.statusCode, JSON.stringify(payload).slice(0, 120)).toBe(status);
      expect(res.json().error.code).toBe(code);
    }
    expect(await countAcceptedSends(t.deps)).toBe(before);
  });

  it('accepts the older body shape and the legacy sender path with Basic credentials', async () => {
    const basic = `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}`).toString('base64')}`;
    const res = await t.app.inject({
      method: 'POST',
      url: `/${t.account.clientId}/sender`,
      headers: { authorization: basic },
      payload: { notificationId: 'legacy', user: { id: 'old', email: 'old@example.com' }, mergeTags: { n: 7 }, email: { subject: 'n={{ n }}', html: 'h' } },
    });
    // 200: the older server SDK logs every 202 as a warning (202 only with warnings in messages).
    expect(res.statusCode).toBe(200);
    const [mail] = await smtp.waitFor(1);
    expect(mail.parsed.subject).toBe('n=7');
    const wrongPath = await t.app.inject({ method: 'POST', url: '/someone-else/sender', headers: { authorization: basic }, payload: { type: 'x', to: { id: 'x' } } });
    // Basic credentials act in their own environment only (README: permission matrix).
    expect([wrongPath.statusCode, wrongPath.json().error.code]).toEqual([403, 'FORBIDDEN']);
  });
});

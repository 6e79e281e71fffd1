// The List-Unsubscribe mailto (RFC 2369) over real SMTP: the address in a sent mail's header has
// a short lower-case local part at CLARION_INBOUND_DOMAIN; mail to it (in any case) at the
// inbound SMTP server turns the type's email off like the one-click POST, emits EMAIL_UNSUBSCRIBE
// once with method "mail", and later sends are SKIP; tampered, foreign and cross-kind addresses
// are refused at RCPT.
import nodemailer, { type Transporter } from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InboundSmtpServer } from '../../src/modules/addresses/inbound-smtp.js';
import { PreferencesRepository } from '../../src/modules/preferences/preferences.repository.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { unsubscribeUrls } from '../helpers/mail-links.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver, verifySignatures } from '../helpers/webhook-receiver.js';

const DOMAIN = 'in.clarion.test';

describe.each(STORAGE_KINDS)('List-Unsubscribe mailto through the inbound SMTP server (%s)', (kind) => {
  let t: TestContext;
  let peer: SmtpPeer;
  let inbound: InboundSmtpServer;
  let mta: Transporter;
  let receiver: WebhookReceiver;
  let secret: string;

  const send = async (user: string, type = 'weekly_digest') => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type, to: { id: user, email: `${user}@example.com` }, email: { subject: 'Digest', html: '<p>News</p>' } } });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();
    const record = await eventually(async () => {
      const r = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0] as Record<string, unknown> | undefined;
      return r && (r.email_sent_at || r.email_routing === 'SKIP') ? r : undefined;
    }, 15_000, `log of ${trackingId}`);
    return { trackingId, record };
  };
  /** The mailto of the mail a send delivered (matched by the Message-ID its log records). */
  const mailtoOf = async (record: Record<string, unknown>) => {
    const mail = await eventually(() => peer.messages.find((m) => m.parsed.messageId === record.email_sent_message_id), 10_000, 'the mail');
    return unsubscribeUrls(mail).mailto.slice('mailto:'.length);
  };
  const refusedAtRcpt = async (to: string) => {
    const err = (await mta.sendMail({ from: 'someone@example.com', to, subject: 'unsubscribe', text: '' }).catch((e: unknown) => e)) as { responseCode?: number; command?: string };
    return err.responseCode === 550 && err.command === 'RCPT TO';
  };
  const unsubscribeEvents = (trackingId: string) => receiver.requests.filter((r) => (JSON.parse(r.body) as { eventType: string; trackingId: string }).eventType === 'EMAIL_UNSUBSCRIBE' && (JSON.parse(r.body) as { trackingId: string }).trackingId === trackingId);

  beforeAll(async () => {
    peer = await startSmtpPeer();
    receiver = await new WebhookReceiver().start();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: peer.url, allowPrivateNetworks: true, webhookPollMs: 20, inboundDomain: DOMAIN } });
    t.services.webhooks.worker.start();
    inbound = await new InboundSmtpServer(t.services.inbound, t.deps.logger, { port: 0, host: '127.0.0.1', maxBytes: 1024 * 1024 }).listen();
    mta = nodemailer.createTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
    const endpoint = await t.app.inject({ method: 'POST', url: '/webhooks', headers: t.auth, payload: { webhook: receiver.url, events: ['EMAIL_UNSUBSCRIBE'] } });
    secret = endpoint.json().secret;
  });
  afterAll(async () => {
    mta.close();
    await inbound.close();
    await t.services.webhooks.worker.stop();
    await t.close();
    await receiver.close();
    await peer.close();
  });

  it('mail to the mailto of a sent email unsubscribes once, like the one-click POST, whatever the case of the address', async () => {
    const { trackingId, record } = await send('mailer');
    const address = await mailtoOf(record);
    const [local, domain] = address.split('@');
    expect(domain).toBe(DOMAIN);
    expect(local).toMatch(/^unsubscribe\+[a-z2-7]{42}$/);
    expect(Buffer.byteLength(local)).toBeLessThanOrEqual(64);

    // A mail system upper-cases the local part on the way: still the same address.
    const info = await mta.sendMail({ from: 'mailer@example.com', to: `${local.toUpperCase()}@${DOMAIN.toUpperCase()}`, subject: 'unsubscribe', text: 'unsubscribe' });
    expect(info.accepted).toHaveLength(1);
    const prefs = await new PreferencesRepository(t.deps.db).ofUser(t.account.accountId, t.account.clientId, 'mailer');
    expect(prefs.map((p) => [p.notification_id, p.channel, p.delivery, p.source])).toEqual([['weekly_digest', 'email', 'off', 'unsubscribe']]);

    const logged = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
    expect(logged).toMatchObject({ email_unsubscribed_method: 'mail', email_unsubscribed_at: expect.any(String) });
    const later = await send('mailer');
    expect(later.record).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED' });
    expect((await send('mailer', 'order_shipped')).record.email_routing).toBe('SEND');

    const [event] = await eventually(() => unsubscribeEvents(trackingId).length > 0 && unsubscribeEvents(trackingId), 10_000, 'EMAIL_UNSUBSCRIBE');
    const payload = verifySignatures(event, secret).viaPingram as unknown as Record<string, unknown>;
    expect(payload).toMatchObject({ eventType: 'EMAIL_UNSUBSCRIBE', channel: 'EMAIL', userId: 'mailer', notificationId: 'weekly_digest', trackingId, details: { method: 'mail', ip: '127.0.0.1' } });

    // Sent again (a retrying MTA, a second click in a mail client): accepted, nothing more happens.
    await mta.sendMail({ from: 'mailer@example.com', to: address, subject: 'unsubscribe', text: '' });
    const rows = await t.deps.db.withTables<{ webhook_events: { type: string; tracking_id: string | null } }>().selectFrom('webhook_events').select('type').where('type', '=', 'EMAIL_UNSUBSCRIBE').where('tracking_id', '=', trackingId).execute();
    expect(rows).toHaveLength(1);
    // Not kept as inbound mail.
    expect((await t.app.inject({ method: 'GET', url: '/inbound-emails', headers: t.auth })).json().emails).toEqual([]);
  });

  it('refuses at RCPT a tampered token, another domain, another kind of token and a delivery that is gone', async () => {
    const { record } = await send('tamper');
    const address = await mailtoOf(record);
    const [local] = address.split('@');
    const flip = (c: string) => (c === 'a' ? 'b' : 'a');
    // One character of the delivery id, one of the MAC.
    expect(await refusedAtRcpt(`${local.slice(0, 14)}${flip(local[14])}${local.slice(15)}@${DOMAIN}`)).toBe(true);
    expect(await refusedAtRcpt(`${local.slice(0, -1)}${flip(local.slice(-1))}@${DOMAIN}`)).toBe(true);
    // The right token at the sender's domain, or under another prefix.
    expect(await refusedAtRcpt(`${local}@clarion.localhost`)).toBe(true);
    expect(await refusedAtRcpt(`${local.replace('unsubscribe+', 'support+')}@${DOMAIN}`)).toBe(true);
    // The one-click URL's token as a local part.
    const https = unsubscribeUrls(peer.messages.find((m) => m.parsed.messageId === record.email_sent_message_id)!).https;
    expect(await refusedAtRcpt(`unsubscribe+${https.split('/').pop()!.slice(0, 42).toLowerCase()}@${DOMAIN}`)).toBe(true);
    // A valid token of a delivery that does not exist (purged).
    const ghost = t.services.engagement.tokens.mailToken('00000000-0000-7000-8000-000000000001')!;
    expect(await refusedAtRcpt(`unsubscribe+${ghost}@${DOMAIN}`)).toBe(true);
    expect(await new PreferencesRepository(t.deps.db).ofUser(t.account.accountId, t.account.clientId, 'tamper')).toEqual([]);
  });
});

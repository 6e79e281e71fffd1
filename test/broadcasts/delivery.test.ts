// Broadcast delivery with the workers running, on both engines, to a real SMTP peer on loopback:
// each recipient gets one mail through the email path (its own trackingId, merge tags rendered
// with the user, the broadcast's sender and reply-to, tracking and List-Unsubscribe headers); a
// peer refusing an address makes a bounce; opens, clicks and a one-click unsubscribe through the
// engagement routes; the recipients and metrics follow, and the broadcast becomes sent. The
// EMAIL_* webhook events of its recipients carry the broadcastId (a plain send's do not).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callAs, createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { hrefs, pixelOf, unsubscribeUrls } from '../helpers/mail-links.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const PUBLIC_URL = 'https://clarion.example';
const EVENTS = ['EMAIL_DELIVERED', 'EMAIL_FAILED', 'EMAIL_OPEN', 'EMAIL_CLICK', 'EMAIL_UNSUBSCRIBE'];

interface Recipient {
  userId: string;
  email?: string;
  state: string;
  trackingId?: string;
  sentAt?: string;
  deliveredAt?: string;
  bouncedAt?: string;
  openedAt?: string;
  clickedAt?: string;
  unsubscribedAt?: string;
}

describe.each(STORAGE_KINDS)('broadcast delivery (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let receiver: WebhookReceiver;
  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown) => callAs(t, method, url, payload);
  const status = async (id: string) => (await call('GET', `/broadcasts/${id}`)).json<{ status: string }>().status;
  const recipients = async (id: string) => (await call('GET', `/broadcasts/${id}/recipients`)).json<{ recipients: Recipient[] }>().recipients;
  /** A path of this server from a URL of its public address. */
  const path = (url: string) => url.replace(PUBLIC_URL, '');

  beforeAll(async () => {
    smtp = await startSmtpPeer({ reject: { 'gone@example.com': 550 } });
    receiver = await new WebhookReceiver().start();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true, publicUrl: PUBLIC_URL, webhookPollMs: 20 } });
    t.services.webhooks.worker.start();
    expect((await call('POST', '/webhooks', { webhook: receiver.url, events: EVENTS })).statusCode).toBe(200);
    await seedUsers(t, [
      userRow(t, 'reader-1', { email: 'reader-1@example.com', properties: '{"plan":"pro","first":"Ada"}' }),
      userRow(t, 'reader-2', { email: 'reader-2@example.com', properties: '{"plan":"pro","first":"Alan"}' }),
      userRow(t, 'reader-3', { email: 'reader-3@example.com', properties: '{"plan":"pro","first":"Grace"}' }),
      userRow(t, 'reader-4', { email: 'gone@example.com', properties: '{"plan":"pro","first":"Gone"}' }),
      userRow(t, 'reader-5', { properties: '{"plan":"pro"}' }),
    ]);
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
    await receiver?.close();
  });

  it('sends each recipient one mail through the email path; bounces, opens, clicks and unsubscribes reach recipients and metrics', async () => {
    const { broadcastId: id } = await createDraft(t, {
      subject: 'News for {{ user.properties.first }}',
      html: '<p>Hello {{ user.properties.first }} ({{ user.email }})</p><p><a href="https://shop.example/news">Read</a></p>',
      replyToAddress: 'replies@example.com',
    });
    expect((await call('POST', `/broadcasts/${id}/send`)).statusCode).toBe(200);
    await eventually(async () => (await status(id)) === 'sent', 20_000, 'the broadcast sent');

    const mails = await smtp.waitFor(3);
    expect(mails).toHaveLength(3);
    const byTo = new Map(mails.map((m) => [m.envelope.to[0], m]));
    expect([...byTo.keys()].sort()).toEqual(['reader-1@example.com', 'reader-2@example.com', 'reader-3@example.com']);
    const ada = byTo.get('reader-1@example.com')!;
    expect(ada.parsed).toMatchObject({ subject: 'News for Ada', html: expect.stringContaining('<p>Hello Ada (reader-1@example.com)</p>') });
    expect(ada.parsed.from?.value[0]).toEqual({ address: t.deps.config.defaultFromAddress, name: 'Clarion News' });
    expect(ada.parsed.replyTo?.value[0].address).toBe('replies@example.com');
    expect(unsubscribeUrls(ada).https).toMatch(/^https:\/\/clarion\.example\/unsubscribe\//);
    expect(ada.raw.toString('utf8')).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click/im);

    const rows = await recipients(id);
    const of = (userId: string) => rows.find((r) => r.userId === userId)!;
    expect(rows.map((r) => [r.userId, r.state])).toEqual([
      ['reader-1', 'delivered'],
      ['reader-2', 'delivered'],
      ['reader-3', 'delivered'],
      ['reader-4', 'bounced'],
      ['reader-5', 'skipped'],
    ]);
    expect(new Set(rows.slice(0, 4).map((r) => r.trackingId)).size).toBe(4);
    expect(of('reader-1')).toMatchObject({ sentAt: expect.any(String), deliveredAt: expect.any(String) });
    expect(of('reader-4')).toMatchObject({ bouncedAt: expect.any(String) });
    // Its log is the one of any send: the trackingId of the recipient.
    const log = (await call('GET', `/logs/${of('reader-1').trackingId}`)).json<{ logs: { type: string; email_sent_at?: string }[] }>().logs[0];
    expect(log.type).toBe('newsletter');

    // Ada opens, Alan clicks, Grace unsubscribes (one-click).
    expect((await t.app.inject({ method: 'GET', url: path(pixelOf(ada.parsed.html as string)!) })).statusCode).toBe(200);
    const alan = byTo.get('reader-2@example.com')!;
    const link = hrefs(alan.parsed.html as string).find((h) => h.startsWith(PUBLIC_URL))!;
    expect((await t.app.inject({ method: 'GET', url: path(link) })).statusCode).toBe(302);
    const grace = byTo.get('reader-3@example.com')!;
    const unsubscribe = await t.app.inject({ method: 'POST', url: path(unsubscribeUrls(grace).https), headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'List-Unsubscribe=One-Click' });
    expect(unsubscribe.statusCode).toBe(200);

    const metrics = (await call('GET', `/broadcasts/${id}/metrics`)).json();
    expect(metrics).toMatchObject({
      status: 'sent',
      total: 5,
      counts: { pending: 0, sent: 3, delivered: 3, failed: 0, bounced: 1, opened: 2, clicked: 1, unsubscribed: 1, skipped: 1 },
      skipped: { NO_EMAIL: 1 },
      rates: { delivery: 1, open: 0.6667, click: 0.3333, bounce: 0.25, failure: 0, unsubscribe: 0.3333 },
    });
    const after = await recipients(id);
    expect(after.map((r) => [r.userId, r.state])).toEqual([
      ['reader-1', 'opened'],
      ['reader-2', 'clicked'],
      ['reader-3', 'unsubscribed'],
      ['reader-4', 'bounced'],
      ['reader-5', 'skipped'],
    ]);
    expect((await call('GET', `/broadcasts/${id}/recipients?state=clicked`)).json().recipients.map((r: Recipient) => r.userId)).toEqual(['reader-2']);
    const transitions = (await call('GET', `/broadcasts/${id}/transitions`)).json<{ transitions: { operation: string; actor: string }[] }>().transitions;
    expect(transitions.at(-1)).toMatchObject({ operation: 'complete', actor: 'system' });
    // Nobody got it twice.
    expect(smtp.messages).toHaveLength(3);

    // The webhook events of its recipients carry the broadcastId; a plain send's do not.
    const plain = (await call('POST', '/send', { type: 'newsletter', to: { id: 'reader-1' }, email: { subject: 'Plain', html: '<p>Plain</p>' } })).json<{ trackingId: string }>().trackingId;
    const payloads = () => receiver.requests.map((r) => JSON.parse(r.body) as { eventType: string; trackingId: string; broadcastId?: string });
    const seen = (type: string, trackingId: string) => payloads().find((p) => p.eventType === type && p.trackingId === trackingId);
    await eventually(
      () => Boolean(seen('EMAIL_DELIVERED', plain) && seen('EMAIL_FAILED', of('reader-4').trackingId!) && seen('EMAIL_UNSUBSCRIBE', of('reader-3').trackingId!) && seen('EMAIL_CLICK', of('reader-2').trackingId!) && seen('EMAIL_OPEN', of('reader-1').trackingId!)),
      15_000,
      'the webhook events',
    );
    for (const user of ['reader-1', 'reader-2', 'reader-3']) expect(seen('EMAIL_DELIVERED', of(user).trackingId!)).toMatchObject({ broadcastId: id });
    expect(seen('EMAIL_FAILED', of('reader-4').trackingId!)).toMatchObject({ broadcastId: id, failureCode: 'SMTP_RECIPIENT_REJECTED' });
    expect(seen('EMAIL_OPEN', of('reader-1').trackingId!)).toMatchObject({ broadcastId: id });
    expect(seen('EMAIL_CLICK', of('reader-2').trackingId!)).toMatchObject({ broadcastId: id });
    expect(seen('EMAIL_UNSUBSCRIBE', of('reader-3').trackingId!)).toMatchObject({ broadcastId: id });
    expect(seen('EMAIL_DELIVERED', plain)).not.toHaveProperty('broadcastId');
  });
});

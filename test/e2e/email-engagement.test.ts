// Issue 12, "Done when": one email through POST /send and everything a reader does with it, over
// real sockets. The mail reaches a loopback SMTP peer; its pixel is fetched and a link clicked
// over HTTP (the 302 followed to a loopback page); a bare RFC 8058 POST to its List-Unsubscribe
// https URL unsubscribes; a reply goes over SMTP to the inbound server. EMAIL_OPEN, EMAIL_CLICK,
// EMAIL_UNSUBSCRIBE and EMAIL_INBOUND reach a loopback webhook endpoint signed for
// pingram/webhooks and standardwebhooks, and GET /logs shows every log field, at the injected
// clock's times, with what the endpoint answered to each event (`*_webhook_res`).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InboundSmtpServer } from '../../src/modules/addresses/inbound-smtp.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { hrefs, pixelOf, unsubscribeUrls } from '../helpers/mail-links.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver, verifySignatures } from '../helpers/webhook-receiver.js';

/** Where mail readers reach Clarion (a TLS proxy in production); the test maps it to the listening server. */
const PUBLIC_URL = 'https://clarion.example';
const DOMAIN = 'in.clarion.test';
const EVENTS = ['EMAIL_OPEN', 'EMAIL_CLICK', 'EMAIL_UNSUBSCRIBE', 'EMAIL_INBOUND'];
/** Clock steps between the reader's actions: short of the webhook lease (timeout + 5 s), which a manual clock would otherwise expire under an in-flight request. */
const STEP_MS = 1_000;

interface Payload {
  eventType: string;
  channel: string;
  userId: string;
  notificationId: string;
  trackingId: string;
  clickedLink?: string;
  occurredAt: string;
  details: Record<string, unknown>;
}

/** A shop's page the email links to: the end of the click's redirect. */
async function startLandingPage(): Promise<{ url: string; paths: string[]; close: () => Promise<void> }> {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    paths.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<h1>Order ${/\d+/.exec(req.url ?? '')?.[0] ?? '?'}</h1>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    paths,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.each(STORAGE_KINDS)('an email end to end: open, click, unsubscribe, reply (%s)', (kind) => {
  // Real time at the start (webhook signatures are checked against it), then moved by hand.
  const clock = new ManualClock(new Date());
  let t: TestContext;
  let smtp: SmtpPeer;
  let inbound: InboundSmtpServer;
  let receiver: WebhookReceiver;
  let landing: Awaited<ReturnType<typeof startLandingPage>>;
  let secret: string;
  let base = '';
  const local = (url: string) => url.replace(PUBLIC_URL, base);
  const call = (method: 'GET' | 'POST', url: string, payload?: object) => t.app.inject({ method, url, headers: t.auth, ...(payload ? { payload } : {}) });
  const log = async (trackingId: string) => (await call('GET', `/logs/${trackingId}`)).json().logs?.[0] as Record<string, unknown> | undefined;

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    receiver = await new WebhookReceiver().start();
    landing = await startLandingPage();
    t = await createTestContext(kind, { workers: true, clock, config: { smtpUrl: smtp.url, allowPrivateNetworks: true, webhookPollMs: 20, publicUrl: PUBLIC_URL, inboundDomain: DOMAIN } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    t.services.webhooks.worker.start();
    inbound = await new InboundSmtpServer(t.services.inbound, t.deps.logger, { port: 0, host: '127.0.0.1', maxBytes: 1024 * 1024 }).listen();
    const endpoint = await call('POST', '/webhooks', { webhook: receiver.url, events: EVENTS });
    expect(endpoint.statusCode).toBe(200);
    secret = endpoint.json().secret;
    expect((await call('POST', '/addresses', { prefix: 'support' })).statusCode).toBe(200);
  });
  afterAll(async () => {
    await inbound?.close();
    await t?.services.webhooks.worker.stop();
    await t?.close();
    await Promise.all([receiver?.close(), smtp?.close(), landing?.close()]);
  });

  it('sends, is opened, clicked, unsubscribed from and replied to: four signed events and the log fields', async () => {
    const sentAt = clock.now();
    const at = (steps: number) => new Date(sentAt.getTime() + steps * STEP_MS).toISOString();
    const html = `<p>Your order shipped.</p><p><a href="${landing.url}/orders/42">Track order 42</a></p>`;
    const res = await call('POST', '/send', { type: 'order_shipped', to: { id: 'ada', email: 'ada@example.com' }, email: { subject: 'Your order shipped', html } });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();

    // The mail as the receiving server got it.
    const [mail] = await smtp.waitFor(1);
    expect(mail.envelope.to).toEqual(['ada@example.com']);
    const body = String(mail.parsed.html);
    const pixel = local(pixelOf(body)!);
    const [link] = hrefs(body).map(local);
    const { https } = unsubscribeUrls(mail);
    expect(https).toMatch(/^https:\/\/clarion\.example\/unsubscribe\//);
    const messageId = mail.parsed.messageId!;
    // Opened at once, as a mail client that loads images on arrival does: possibly before the
    // worker has committed `sent` (the peer has the mail as soon as it answered 250); it counts.
    clock.set(new Date(at(1)));
    const opened = await fetch(pixel, { headers: { 'user-agent': 'E2E-Mail/1.0' } });
    expect(opened.status).toBe(200);
    expect(opened.headers.get('content-type')).toBe('image/gif');

    clock.set(new Date(at(2)));
    const page = await fetch(link, { headers: { 'user-agent': 'E2E-Browser/2.0' } });
    expect(page.redirected).toBe(true);
    expect(page.url).toBe(`${landing.url}/orders/42`);
    expect(await page.text()).toBe('<h1>Order 42</h1>');
    expect(landing.paths).toEqual(['/orders/42']);

    clock.set(new Date(at(3)));
    const unsubscribed = await fetch(local(https), { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(unsubscribed.status).toBe(200);

    clock.set(new Date(at(4)));
    const mta = nodemailer.createTransport({ host: '127.0.0.1', port: inbound.port, secure: false, ignoreTLS: true });
    try {
      const info = await mta.sendMail({ from: 'Ada <ada@example.com>', to: `support@${DOMAIN}`, subject: 'Re: Your order shipped', text: 'Thank you!\n', inReplyTo: messageId, references: [messageId] });
      expect(info.accepted).toEqual([`support@${DOMAIN}`]);
    } finally {
      mta.close();
    }

    // The four events, each request verified by both libraries before it is read. Delivery is
    // at least once: a repeat carries the same event id.
    const ofMail = () => receiver.requests.filter((r) => (JSON.parse(r.body) as Payload).trackingId === trackingId);
    const types = () => new Set(ofMail().map((r) => (JSON.parse(r.body) as Payload).eventType));
    const requests = await eventually(() => types().size === EVENTS.length && ofMail(), 10_000, 'four events');
    const events = new Map<string, Payload>();
    const ids = new Map<string, Set<string>>();
    for (const r of requests) {
      const { viaPingram, viaStandard } = verifySignatures(r, secret);
      expect(viaStandard).toEqual(viaPingram);
      const payload = viaPingram as unknown as Payload & { id: string };
      events.set(payload.eventType, payload);
      ids.set(payload.eventType, (ids.get(payload.eventType) ?? new Set()).add(payload.id));
    }
    expect([...events.keys()].sort()).toEqual([...EVENTS].sort());
    expect([...ids.values()].map((s) => s.size)).toEqual([1, 1, 1, 1]);
    const common = { channel: 'EMAIL', userId: 'ada', notificationId: 'order_shipped', trackingId };
    expect(events.get('EMAIL_OPEN')).toMatchObject({ ...common, occurredAt: at(1), details: { email_opened_user_agent: 'E2E-Mail/1.0', first: true, count: 1 } });
    expect(events.get('EMAIL_CLICK')).toMatchObject({ ...common, occurredAt: at(2), clickedLink: `${landing.url}/orders/42`, details: { email_clicked_user_agent: 'E2E-Browser/2.0' } });
    expect(events.get('EMAIL_UNSUBSCRIBE')).toMatchObject({ ...common, occurredAt: at(3), details: { method: 'one-click', ip: '127.0.0.1' } });
    expect(events.get('EMAIL_INBOUND')).toMatchObject({ ...common, occurredAt: at(4), details: { email_inbound_from: 'ada@example.com', email_inbound_in_reply_to: messageId, email_inbound_resolution_type: 'in_reply_to' } });

    expect(await log(trackingId)).toMatchObject({
      email_routing: 'SEND',
      email_sent_message_id: messageId,
      email_opened_at: at(1),
      email_opened_user_agent: 'E2E-Mail/1.0',
      email_opened_ip: '127.0.0.1',
      email_opened_count: 1,
      email_clicked_at: at(2),
      email_clicked_link: `${landing.url}/orders/42`,
      email_clicked_user_agent: 'E2E-Browser/2.0',
      email_clicked_count: 1,
      email_unsubscribed_at: at(3),
      email_unsubscribed_method: 'one-click',
      email_inbound_at: at(4),
      email_inbound_from: 'ada@example.com',
      email_inbound_from_name: 'Ada',
      email_inbound_inbox: `support@${DOMAIN}`,
      email_inbound_subject: 'Re: Your order shipped',
      email_inbound_body_text: 'Thank you!\n',
      email_inbound_resolution_type: 'in_reply_to',
    });

    // What the endpoint answered to each event, once its attempt is recorded (just after the answer).
    expect(await eventually(async () => {
      const record = await log(trackingId);
      return record?.email_inbound_webhook_delivered !== undefined && record?.email_opened_webhook_res && record?.email_clicked_webhook_res && record;
    }, 10_000, 'the _webhook_ log fields')).toMatchObject({
      email_opened_webhook_res: 'HTTP 200: ok',
      email_clicked_webhook_res: 'HTTP 200: ok',
      email_inbound_webhook_delivered: true,
      email_inbound_webhook_res: 'HTTP 200: ok',
    });

    // Sent when the worker read the clock after the peer's 250: at(0), or later if the reader was quicker.
    expect([0, 1, 2, 3, 4].map(at)).toContain((await log(trackingId))?.email_sent_at);

    // The unsubscribe holds: the next email of the type is not sent.
    const next = await call('POST', '/send', { type: 'order_shipped', to: { id: 'ada' }, email: { subject: 'Another', html: '<p>Hi</p>' } });
    const skipped = await eventually(async () => {
      const record = await log(next.json<{ trackingId: string }>().trackingId);
      return record?.email_routing ? record : undefined;
    }, 10_000, 'routing of the next send');
    expect(skipped).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED' });
  });
});

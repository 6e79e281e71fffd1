// Email engagement end to end over real sockets: mail reaches a parsing SMTP peer with the open
// pixel, tracked links and both List-Unsubscribe headers; the pixel and the links are fetched
// over HTTP from the listening server, which records the log fields (first and later) and emits
// EMAIL_OPEN / EMAIL_CLICK to a webhook receiver; a bare POST to the one-click URL unsubscribes,
// after which the type's email is routed SKIP; forged tokens and other environments get nothing.
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { hrefs, pixelOf, unsubscribeUrls } from '../helpers/mail-links.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const PUBLIC_URL = 'https://clarion.example';
const HTML =
  '<html><body><h1>Your order shipped</h1>' +
  '<p><a href="https://shop.example/orders/42?ref=mail&amp;x=1" data-link-tags="campaign:spring;button:cta">Track it</a></p>' +
  "<p><a class='plain' href='https://shop.example/help'>Help</a> <a href=\"mailto:help@shop.example\">Write</a>" +
  ' <a href="https://shop.example/private" data-no-track>Private</a></p></body></html>';

describe.each(STORAGE_KINDS)('email engagement: tracking and one-click unsubscribe (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let receiver: WebhookReceiver;
  let base = '';
  /** A URL of the mail (on PUBLIC_URL) as the listening server's. */
  const local = (url: string) => url.replace(PUBLIC_URL, base);

  const send = async (options: { type?: string; user?: string; auth?: { authorization: string }; html?: string } = {}) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: options.auth ?? t.auth,
      payload: { type: options.type ?? 'order_shipped', to: { id: options.user ?? 'ada', email: `${options.user ?? 'ada'}@example.com` }, email: { subject: 'Shipped', html: options.html ?? HTML } },
    });
    expect(res.statusCode).toBe(200);
    return res.json<{ trackingId: string }>().trackingId;
  };
  const log = async (trackingId: string, auth = t.auth) =>
    eventually(async () => {
      const res = await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: auth });
      const record = res.json().logs?.[0] as Record<string, unknown> | undefined;
      return record && (record.email_sent_at || record.email_routing === 'SKIP') ? record : undefined;
    }, 10_000, `log of ${trackingId}`);
  const mailFor = (count: number) => smtp.waitFor(count).then((all) => all[count - 1]);
  /**
   * The mail of a send once its delivery is recorded sent: the peer has the mail as soon as it
   * answered 250, a moment before the ledger commits that (the log read below waits for it).
   */
  const sentMail = async (count: number, trackingId: string, auth = t.auth) => {
    const mail = await mailFor(count);
    await log(trackingId, auth);
    return mail;
  };
  const eventsOf = (type: string, trackingId: string) =>
    receiver.requests.map((r) => JSON.parse(r.body) as Record<string, unknown>).filter((p) => p.eventType === type && p.trackingId === trackingId);

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    receiver = await new WebhookReceiver().start();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true, webhookPollMs: 20, publicUrl: PUBLIC_URL } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    t.services.webhooks.worker.start();
    const res = await t.app.inject({ method: 'POST', url: '/webhooks', headers: t.auth, payload: { webhook: receiver.url, events: ['EMAIL_OPEN', 'EMAIL_CLICK', 'EMAIL_UNSUBSCRIBE'] } });
    expect(res.statusCode).toBe(200);
  });
  afterAll(async () => {
    await t.services.webhooks.worker.stop();
    await t.close();
    await receiver.close();
    await smtp.close();
  });
  beforeEach(() => {
    smtp.messages.length = 0;
  });

  it('puts the pixel, tracked links and both List-Unsubscribe headers in the mail', async () => {
    const trackingId = await send({ user: 'headers' });
    const mail = await mailFor(1);
    const html = String(mail.parsed.html);
    const links = hrefs(html);
    expect(links[0]).toMatch(/^https:\/\/clarion\.example\/e\/click\/[\w-]+\.[\w-]+$/);
    expect(links[1]).toMatch(/^https:\/\/clarion\.example\/e\/click\//);
    expect(links[1]).not.toBe(links[0]);
    // mailto: and data-no-track links stay as written.
    expect(links.slice(2)).toEqual(['mailto:help@shop.example', 'https://shop.example/private']);
    expect(pixelOf(html)).toMatch(/^https:\/\/clarion\.example\/e\/open\/[\w-]+\.[\w-]+$/);
    // The pixel is the last thing in the body.
    expect(html.indexOf('<img src=')).toBeGreaterThan(html.indexOf('Private</a>'));
    // The text part keeps the original links.
    expect(mail.parsed.text).toContain('https://shop.example/orders/42?ref=mail&x=1');

    const { raw, https, mailto } = unsubscribeUrls(mail);
    // The mailto is at the inbound domain, with a short lower-case local part (RFC 5321: 64 octets at most).
    expect(raw).toMatch(/^<https:\/\/clarion\.example\/unsubscribe\/[\w-]+\.[\w-]+>, <mailto:unsubscribe\+[a-z2-7]{42}@inbound\.localhost>$/);
    expect(https).toBeTruthy();
    expect(mailto.slice('mailto:'.length, mailto.indexOf('@')).length).toBeLessThanOrEqual(64);
    expect(mail.raw.toString('utf8')).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m);
    expect((await log(trackingId)).email_routing).toBe('SEND');
  });

  it('records the first and every later open and click, answers a real uncached GIF and a 302, and emits the events', async () => {
    const trackingId = await send({ user: 'reader' });
    const mail = await sentMail(1, trackingId);
    const html = String(mail.parsed.html);
    const pixel = local(pixelOf(html)!);
    const [tagged, plain] = hrefs(html).map(local);

    const first = await fetch(pixel, { headers: { 'user-agent': 'MailClient/1.0' } });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('image/gif');
    expect(first.headers.get('cache-control')).toMatch(/no-store/);
    const gif = Buffer.from(await first.arrayBuffer());
    expect(gif.subarray(0, 6).toString('latin1')).toBe('GIF89a');
    expect(gif.readUInt16LE(6)).toBe(1);
    expect(gif.readUInt16LE(8)).toBe(1);

    let record = await log(trackingId);
    expect(record.email_opened_at).toBeTruthy();
    expect(record.email_opened_user_agent).toBe('MailClient/1.0');
    expect(record.email_opened_ip).toBe('127.0.0.1');
    expect(record.email_opened_count).toBe(1);
    const firstOpenAt = record.email_opened_at;

    expect((await fetch(pixel, { headers: { 'user-agent': 'OtherClient/2.0' } })).status).toBe(200);
    record = await log(trackingId);
    expect(record.email_opened_at).toBe(firstOpenAt);
    expect(record.email_opened_user_agent).toBe('MailClient/1.0');
    expect(record.email_opened_count).toBe(2);
    expect(record.email_opened_last_at).toBeTruthy();

    const click = await fetch(tagged, { redirect: 'manual', headers: { 'user-agent': 'Browser/3.0' } });
    expect(click.status).toBe(302);
    expect(click.headers.get('location')).toBe('https://shop.example/orders/42?ref=mail&x=1');
    const second = await fetch(plain, { redirect: 'manual' });
    expect(second.status).toBe(302);
    expect(second.headers.get('location')).toBe('https://shop.example/help');

    record = await log(trackingId);
    expect(record).toMatchObject({
      email_clicked_user_agent: 'Browser/3.0',
      email_clicked_ip: '127.0.0.1',
      email_clicked_link: 'https://shop.example/orders/42?ref=mail&x=1',
      email_clicked_last_link: 'https://shop.example/help',
      email_clicked_count: 2,
    });
    expect(JSON.parse(String(record.email_clicked_link_tags))).toEqual({ campaign: ['spring'], button: ['cta'] });

    await eventually(() => eventsOf('EMAIL_OPEN', trackingId).length === 2 && eventsOf('EMAIL_CLICK', trackingId).length === 2, 10_000, 'two opens and two clicks at the webhook');
    const opens = eventsOf('EMAIL_OPEN', trackingId);
    expect(opens.map((e) => (e.details as Record<string, unknown>).email_opened_user_agent).sort()).toEqual(['MailClient/1.0', 'OtherClient/2.0']);
    expect(opens[0]).toMatchObject({ channel: 'EMAIL', userId: 'reader', notificationId: 'order_shipped', trackingId });
    expect(opens.map((e) => (e.details as Record<string, unknown>).first).sort()).toEqual([false, true]);
    expect(opens.map((e) => (e.details as Record<string, unknown>).count).sort()).toEqual([1, 2]);
    const clicks = eventsOf('EMAIL_CLICK', trackingId);
    const taggedEvent = clicks.find((e) => e.clickedLink === 'https://shop.example/orders/42?ref=mail&x=1');
    expect(taggedEvent).toMatchObject({ channel: 'EMAIL', userId: 'reader', clickedLinkTags: { campaign: ['spring'], button: ['cta'] } });
    expect(clicks.some((e) => e.clickedLink === 'https://shop.example/help' && e.clickedLinkTags === undefined)).toBe(true);
  });

  it('refuses forged and altered tokens with a 404 Error body that says nothing, and records nothing', async () => {
    const trackingId = await send({ user: 'forger' });
    const mail = await sentMail(1, trackingId);
    const html = String(mail.parsed.html);
    const pixel = local(pixelOf(html)!);
    const [link] = hrefs(html).map(local);
    const { https } = unsubscribeUrls(mail);
    const [payload, mac] = link.split('/').pop()!.split('.');
    // Another destination under the same MAC; a flipped MAC; a pixel token used as a link; garbage.
    const otherPayload = Buffer.from(JSON.stringify(['c', t.account.clientId, 'x', 'https://evil.example/'])).toString('base64url');
    const flipped = mac.slice(0, -2) + (mac.endsWith('AA') ? 'BB' : 'AA');
    const pixelToken = pixel.split('/').pop()!;
    const bad = [
      `${base}/e/click/${otherPayload}.${mac}`,
      `${base}/e/click/${payload}.${flipped}`,
      `${base}/e/click/${pixelToken}`,
      `${base}/e/open/${payload}.${mac}`,
      `${base}/e/open/not-a-token`,
      `${base}/unsubscribe/${pixelToken}`,
    ];
    for (const url of bad) {
      const res = await fetch(url, { redirect: 'manual' });
      expect(res.status, url).toBe(404);
      const body = (await res.json()) as { trackingId: string; error: { code: string; message: string; fix?: string } };
      expect(body.error).toEqual({ code: 'NOT_FOUND', message: 'Not found.', fix: 'The link is not valid; use a link from the email as it was sent.' });
      expect(body.trackingId).toBeTruthy();
    }
    const res = await fetch(local(https), { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click' });
    expect(res.status).toBe(200);
    const forged = await fetch(local(https).replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')), { method: 'POST' });
    expect(forged.status).toBe(404);
    const record = await log(trackingId);
    expect(record.email_opened_at).toBeUndefined();
    expect(record.email_clicked_at).toBeUndefined();
  });

  it('a bare POST to the one-click URL unsubscribes: later sends of the type are SKIP with a reason, EMAIL_UNSUBSCRIBE arrives once', async () => {
    const first = await send({ user: 'leaver', type: 'weekly_digest' });
    const mail = await mailFor(1);
    const { https } = unsubscribeUrls(mail);

    // The GET page changes nothing (link scanners fetch it) and offers a button that POSTs.
    const pageRes = await fetch(local(https));
    expect(pageRes.status).toBe(200);
    expect(pageRes.headers.get('content-type')).toMatch(/^text\/html/);
    // Never framed by another site (a one-click button under a decoy), read as HTML, no referrer (the URL holds the token).
    expect(pageRes.headers.get('x-frame-options')).toBe('DENY');
    expect(pageRes.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(pageRes.headers.get('x-content-type-options')).toBe('nosniff');
    expect(pageRes.headers.get('referrer-policy')).toBe('no-referrer');
    const page = await pageRes.text();
    expect(page).toMatch(/<form method="post"/);
    expect(page).toContain('weekly_digest');
    const stillSent = await send({ user: 'leaver', type: 'weekly_digest' });
    expect((await log(stillSent)).email_routing).toBe('SEND');

    // RFC 8058's POST, as bare as it gets: no body, no content type, no credentials.
    const res = await fetch(local(https), { method: 'POST' });
    expect(res.status).toBe(200);
    // A repeat (mail clients retry) is accepted and changes nothing.
    expect((await fetch(local(https), { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: '--x\r\nContent-Disposition: form-data; name="List-Unsubscribe"\r\n\r\nOne-Click\r\n--x--\r\n' })).status).toBe(200);

    const later = await send({ user: 'leaver', type: 'weekly_digest' });
    const record = await log(later);
    expect(record.email_routing).toBe('SKIP');
    expect(record.email_routing_reason).toBe('USER_UNSUBSCRIBED');
    // Other types and other users still get email.
    expect((await log(await send({ user: 'leaver', type: 'order_shipped' }))).email_routing).toBe('SEND');
    expect((await log(await send({ user: 'stayer', type: 'weekly_digest' }))).email_routing).toBe('SEND');

    // The email it came from logs it (the first unsubscribe only).
    expect(await log(first)).toMatchObject({ email_unsubscribed_at: expect.any(String), email_unsubscribed_method: 'one-click' });
    const events = await eventually(() => eventsOf('EMAIL_UNSUBSCRIBE', first).length >= 1 && eventsOf('EMAIL_UNSUBSCRIBE', first), 10_000, 'EMAIL_UNSUBSCRIBE');
    expect(events[0]).toMatchObject({ eventType: 'EMAIL_UNSUBSCRIBE', channel: 'EMAIL', userId: 'leaver', notificationId: 'weekly_digest', trackingId: first, details: { method: 'one-click', ip: '127.0.0.1' } });
    // The repeated POST made no second event (events are written in the unsubscribe's transaction).
    const rows = await t.deps.db.withTables<{ webhook_events: { type: string; tracking_id: string | null } }>().selectFrom('webhook_events').select('type').where('type', '=', 'EMAIL_UNSUBSCRIBE').where('tracking_id', '=', first).execute();
    expect(rows).toHaveLength(1);
  });

  it('tracking off for an environment leaves the mail untouched (List-Unsubscribe stays)', async () => {
    const other = await t.newAccount('untracked');
    const auth = { authorization: `Bearer ${other.apiKey}` };
    const put = await t.app.inject({ method: 'PUT', url: '/settings/email/tracking', headers: auth, payload: { opens: false, clicks: false } });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toEqual({ opens: false, clicks: false });
    expect((await t.app.inject({ method: 'GET', url: '/settings/email/tracking', headers: auth })).json()).toEqual({ opens: false, clicks: false });
    expect((await t.app.inject({ method: 'GET', url: '/settings/email/tracking', headers: t.auth })).json()).toEqual({ opens: true, clicks: true });

    await send({ user: 'untracked', auth });
    const mail = await mailFor(1);
    const html = String(mail.parsed.html);
    expect(pixelOf(html)).toBeUndefined();
    expect(hrefs(html)).toEqual(['https://shop.example/orders/42?ref=mail&x=1', 'https://shop.example/help', 'mailto:help@shop.example', 'https://shop.example/private']);
    expect(unsubscribeUrls(mail).https).toMatch(/^https:\/\/clarion\.example\/unsubscribe\//);

    // Clicks only: links tracked, no pixel.
    await t.app.inject({ method: 'PUT', url: '/settings/email/tracking', headers: auth, payload: { clicks: true } });
    await send({ user: 'untracked', auth });
    const second = String((await mailFor(2)).parsed.html);
    expect(pixelOf(second)).toBeUndefined();
    expect(hrefs(second)[0]).toMatch(/^https:\/\/clarion\.example\/e\/click\//);
  });

  it('a token of one environment never acts on another', async () => {
    const other = await t.newAccount('isolated');
    const auth = { authorization: `Bearer ${other.apiKey}` };
    const theirReceiver = await new WebhookReceiver().start();
    onTestFinished(() => theirReceiver.close());
    const endpoint = await t.app.inject({ method: 'POST', url: '/webhooks', headers: auth, payload: { webhook: theirReceiver.url, events: ['EMAIL_OPEN', 'EMAIL_UNSUBSCRIBE'] } });
    expect(endpoint.statusCode).toBe(200);
    const mine = await send({ user: 'iso' });
    const myMail = await sentMail(1, mine);
    const theirs = await send({ user: 'iso', auth });
    const theirMail = await sentMail(2, theirs, auth);

    // A token signed for the other environment naming my delivery: the ledger looks the delivery
    // up inside the token's environment, finds none, and records nothing.
    const myPixel = pixelOf(String(myMail.parsed.html))!;
    const myDelivery = JSON.parse(Buffer.from(myPixel.split('/').pop()!.split('.')[0], 'base64url').toString()) as string[];
    const crossed = t.services.engagement.tokens.sign({ kind: 'open', envId: other.clientId, deliveryId: myDelivery[2] });
    expect((await fetch(`${base}/e/open/${crossed}`)).status).toBe(200);
    expect((await log(mine)).email_opened_at).toBeUndefined();

    // Their own pixel records on their log only.
    expect((await fetch(local(pixelOf(String(theirMail.parsed.html))!))).status).toBe(200);
    expect((await log(theirs, auth)).email_opened_count).toBe(1);
    expect((await log(mine)).email_opened_at).toBeUndefined();

    // Their unsubscribe turns off their user only: my 'iso' still gets order_shipped.
    // As the confirmation page's button posts it.
    const form = { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'List-Unsubscribe=One-Click&source=page' };
    expect((await fetch(local(unsubscribeUrls(theirMail).https), form)).status).toBe(200);
    const theirEvent = await eventually(() => theirReceiver.requests.map((r) => JSON.parse(r.body) as Record<string, unknown>).find((p) => p.eventType === 'EMAIL_UNSUBSCRIBE'), 10_000, 'their EMAIL_UNSUBSCRIBE');
    expect(theirEvent).toMatchObject({ trackingId: theirs, userId: 'iso', details: { method: 'page' } });
    expect((await log(await send({ user: 'iso', auth }), auth)).email_routing_reason).toBe('USER_UNSUBSCRIBED');
    expect((await log(await send({ user: 'iso' }))).email_routing).toBe('SEND');
    // Their events reach their endpoint only; the crossed token made none.
    expect(receiver.requests.some((r) => (JSON.parse(r.body) as { trackingId: string }).trackingId === theirs)).toBe(false);
    const theirOpens = () => theirReceiver.requests.map((r) => JSON.parse(r.body) as { eventType: string; trackingId: string }).filter((p) => p.eventType === 'EMAIL_OPEN');
    await eventually(() => theirOpens().length > 0, 10_000, 'their EMAIL_OPEN');
    expect(theirOpens().map((p) => p.trackingId)).toEqual([theirs]);
    expect(receiver.requests.some((r) => (JSON.parse(r.body) as { eventType: string; trackingId: string }).eventType === 'EMAIL_OPEN' && (JSON.parse(r.body) as { trackingId: string }).trackingId === mine)).toBe(false);
  });
});

import webpush from 'web-push';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebPushSender, type WebPushSenderOptions, parseRetryAfter, webPushPayload, MAX_WEB_PUSH_PLAINTEXT } from '../../src/channels/push/web-push.js';
import type { VapidCredentials } from '../../src/channels/push/web-push-vapid.js';
import { ManualClock } from '../helpers/context.js';
import { type PushEndpoint, startPushEndpoint } from '../helpers/push-endpoint.js';

const keys = webpush.generateVAPIDKeys();
const vapid: VapidCredentials = { ...keys, subject: 'mailto:ops@clarion.test' };
const content = { title: 'Order shipped', message: 'Your order #42 is on its way', icon: 'https://cdn.example.com/i.png', url: 'https://shop.example.com/orders/42' };

describe('web push adapter against a local push service', () => {
  let a: PushEndpoint;
  let b: PushEndpoint;
  let secure: PushEndpoint;
  const clock = new ManualClock(new Date());
  const senders: WebPushSender[] = [];
  const sender = (options: Partial<WebPushSenderOptions> = {}) => {
    const s = new WebPushSender({ now: () => clock.now(), allowPrivateNetworks: true, ttlSeconds: 86_400, urgency: 'normal', ...options });
    senders.push(s);
    return s;
  };

  beforeAll(async () => {
    [a, b, secure] = await Promise.all([startPushEndpoint(), startPushEndpoint(), startPushEndpoint({ tls: true })]);
  });
  afterAll(async () => {
    await Promise.all(senders.map((s) => s.close()));
    await Promise.all([a.close(), b.close(), secure.close()]);
  });

  it('encrypts {title, message, icon, url} with aes128gcm so the browser keys decrypt it, with TTL, Urgency and Topic', async () => {
    const browser = a.subscribe();
    const outcome = await sender({ ttlSeconds: 3600, urgency: 'high' }).send(vapid, browser.sub, webPushPayload(content), { topic: 'delivery-1' });
    expect(outcome).toMatchObject({ ok: true, status: 201, endpoint: browser.sub.endpoint });
    expect(outcome.ok && outcome.location).toMatch(new RegExp(`^${a.origin}/message/`));
    const [push] = await a.waitFor(1);
    expect(push.json()).toEqual(content);
    expect(push).toMatchObject({ subscriptionId: browser.id, ttl: 3600, urgency: 'high', topic: 'delivery-1', vapidKey: keys.publicKey });
    expect(push.claims).toMatchObject({ aud: a.origin, sub: 'mailto:ops@clarion.test' });
    expect(a.rejected).toEqual([]);
  });

  it('reuses one VAPID JWT per push-service origin and signs another for another origin', async () => {
    const s = sender();
    const [a1, a2, b1] = [a.subscribe(), a.subscribe(), b.subscribe()];
    const before = a.received.length;
    for (const sub of [a1, a2, a1]) expect((await s.send(vapid, sub.sub, 'x')).ok).toBe(true);
    expect((await s.send(vapid, b1.sub, 'y')).ok).toBe(true);
    const fromA = a.received.slice(before);
    expect(fromA).toHaveLength(3);
    expect(new Set(fromA.map((r) => r.jwt)).size).toBe(1);
    const [fromB] = await b.waitFor(1);
    expect(fromB.jwt).not.toBe(fromA[0].jwt);
    expect(fromB.claims.aud).toBe(b.origin);
    expect(fromA[0].claims.aud).toBe(a.origin);

    // Another environment's keys get their own token for the same origin.
    const other = { ...webpush.generateVAPIDKeys(), subject: vapid.subject };
    expect((await s.send(other, a1.sub, 'z')).ok).toBe(true);
    expect(a.received.at(-1)!.jwt).not.toBe(fromA[0].jwt);
    expect(a.received.at(-1)!.vapidKey).toBe(other.publicKey);
  });

  it('signs a new JWT once the cached one is within an hour of expiry', async () => {
    const s = sender();
    const browser = a.subscribe();
    await s.send(vapid, browser.sub, '1');
    const first = a.received.at(-1)!;
    clock.advance(10 * 3600_000);
    await s.send(vapid, browser.sub, '2');
    expect(a.received.at(-1)!.jwt).toBe(first.jwt);
    clock.advance(1.5 * 3600_000);
    await s.send(vapid, browser.sub, '3');
    const renewed = a.received.at(-1)!;
    expect(renewed.jwt).not.toBe(first.jwt);
    expect(renewed.claims.exp).toBeGreaterThan(first.claims.exp);
    clock.set(new Date());
  });

  it('counts the TTL from the send: a retry gets what is left (whole seconds, rounded up), and none is made once it has run out', async () => {
    const s = sender({ ttlSeconds: 3600 });
    const browser = a.subscribe();
    const sentAt = clock.now().getTime();
    const attempt = (firstAttempt: boolean) => s.send(vapid, browser.sub, 'x', { lifetimeStart: { atMs: sentAt, firstAttempt } });
    try {
      expect((await attempt(true)).ok).toBe(true);
      clock.advance(10 * 60_000); // a retry ten minutes later
      expect((await attempt(false)).ok).toBe(true);
      clock.advance(49 * 60_000 + 59_500); // half a second left
      expect((await attempt(false)).ok).toBe(true);
      const ttls = () => a.received.filter((r) => r.subscriptionId === browser.id).map((r) => r.ttl);
      expect(ttls()).toEqual([3600, 3000, 1]);

      clock.advance(500); // the TTL has run out
      const expired = await attempt(false);
      expect(expired).toMatchObject({ ok: false, kind: 'rejected', code: 'PUSH_EXPIRED', endpoint: browser.sub.endpoint });
      expect(!expired.ok && expired.reason).toContain('CLARION_WEB_PUSH_TTL');
      expect(ttls()).toHaveLength(3);
    } finally {
      clock.set(new Date());
    }
  });

  it('a TTL of 0 (now or never) is sent on the first attempt only: a retry is not sent', async () => {
    const s = sender({ ttlSeconds: 0 });
    const browser = a.subscribe();
    const lifetimeStart = { atMs: clock.now().getTime(), firstAttempt: true };
    expect((await s.send(vapid, browser.sub, 'x', { lifetimeStart })).ok).toBe(true);
    expect(a.received.filter((r) => r.subscriptionId === browser.id).map((r) => r.ttl)).toEqual([0]);
    expect(await s.send(vapid, browser.sub, 'x', { lifetimeStart: { ...lifetimeStart, firstAttempt: false } })).toMatchObject({ ok: false, code: 'PUSH_EXPIRED' });
    expect(a.received.filter((r) => r.subscriptionId === browser.id)).toHaveLength(1);
  });

  it('reports 404 and 410 as gone, 429 and 5xx as retryable with Retry-After, other 4xx as rejected', async () => {
    const s = sender();
    const gone = a.subscribe();
    const missing = a.subscribe();
    const limited = a.subscribe();
    const broken = a.subscribe();
    const refused = a.subscribe();
    a.answer(gone, 410);
    a.answer(missing, 404);
    a.answer(limited, 429, { times: 1, retryAfter: '7' });
    a.answer(broken, 503, { times: 1, retryAfter: new Date(clock.now().getTime() + 120_000).toUTCString() });
    a.answer(refused, 400);

    expect(await s.send(vapid, gone.sub, 'x')).toMatchObject({ ok: false, kind: 'gone', code: 'SUBSCRIPTION_GONE', status: 410 });
    expect(await s.send(vapid, missing.sub, 'x')).toMatchObject({ ok: false, kind: 'gone', status: 404 });
    expect(await s.send(vapid, limited.sub, 'x')).toMatchObject({ ok: false, kind: 'retry', code: 'RATE_LIMITED', status: 429, retryAfterMs: 7000 });
    const unavailable = await s.send(vapid, broken.sub, 'x');
    expect(unavailable).toMatchObject({ ok: false, kind: 'retry', code: 'PUSH_SERVICE_ERROR', status: 503 });
    expect(!unavailable.ok && unavailable.retryAfterMs).toBeGreaterThan(115_000);
    expect(await s.send(vapid, refused.sub, 'x')).toMatchObject({ ok: false, kind: 'rejected', code: 'PUSH_REJECTED', status: 400 });

    // The retried pushes go through once the push service recovers.
    expect(await s.send(vapid, limited.sub, 'again')).toMatchObject({ ok: true, status: 201 });
    expect(await s.send(vapid, broken.sub, 'again')).toMatchObject({ ok: true, status: 201 });
    expect(a.accepted().filter((r) => r.subscriptionId === limited.id).map((r) => r.payload?.toString())).toEqual(['again']);
  });

  it('goes through the SSRF guard: a loopback endpoint is refused unless private networks are allowed', async () => {
    const browser = a.subscribe();
    const before = a.received.length + a.rejected.length;
    const outcome = await sender({ allowPrivateNetworks: false }).send(vapid, browser.sub, 'x');
    expect(outcome).toMatchObject({ ok: false, kind: 'rejected', code: 'ENDPOINT_BLOCKED' });
    expect(a.received.length + a.rejected.length).toBe(before);
  });

  it('speaks https to a push service whose certificate it trusts', async () => {
    const browser = secure.subscribe();
    expect(await sender({ ca: secure.ca }).send(vapid, browser.sub, webPushPayload(content))).toMatchObject({ ok: true, status: 201 });
    const [push] = await secure.waitFor(1);
    expect(push.json()).toEqual(content);
    expect(push.claims.aud).toBe(secure.origin);
    // Without the CA the certificate is not trusted: nothing is accepted.
    expect(await sender().send(vapid, browser.sub, 'x')).toMatchObject({ ok: false, kind: 'retry', code: 'NETWORK' });
    expect(secure.accepted()).toHaveLength(1);
  });

  it('refuses a subscription whose keys cannot be encrypted to', async () => {
    const browser = a.subscribe();
    const outcome = await sender().send(vapid, { endpoint: browser.sub.endpoint, keys: { p256dh: 'AAAA', auth: browser.sub.keys.auth } }, 'x');
    expect(outcome).toMatchObject({ ok: false, kind: 'rejected', code: 'INVALID_SUBSCRIPTION' });
  });

  it('parses Retry-After as seconds or an HTTP date and trims payloads to one record', () => {
    const now = new Date('2026-01-15T10:00:00Z');
    expect(parseRetryAfter('30', now)).toBe(30_000);
    expect(parseRetryAfter('Thu, 15 Jan 2026 10:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('Thu, 15 Jan 2026 09:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    // Not RFC 9110 forms: Date.parse read these as days of 2001, a retry at once.
    for (const value of ['-5', '1.5', 'May 5', '2026-01-15T10:01:00Z']) expect(parseRetryAfter(value, now), value).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    const long = webPushPayload({ title: 't', message: 'é'.repeat(5000) });
    expect(long.length).toBeLessThanOrEqual(MAX_WEB_PUSH_PLAINTEXT);
    const parsed = JSON.parse(long.toString('utf8'));
    expect(parsed.title).toBe('t');
    expect(parsed.message.endsWith('…')).toBe(true);
  });

  it('fits every payload in one record: the message shortened, else the icon left out, the title shortened, the url left out; cut between characters, using the room', () => {
    const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
    const read = (body: Buffer) => JSON.parse(body.toString('utf8')) as { title: string; message: string; icon?: string; url?: string };
    // Emoji (4 bytes, two UTF-16 units each): never half of one.
    const emoji = webPushPayload({ title: 't', message: '😀'.repeat(1999) });
    expect(emoji.length).toBeLessThanOrEqual(MAX_WEB_PUSH_PLAINTEXT);
    expect(emoji.length).toBeGreaterThan(MAX_WEB_PUSH_PLAINTEXT - 8);
    expect(read(emoji).message).not.toMatch(loneSurrogate);
    expect(read(emoji).message.endsWith('😀…')).toBe(true);
    // Three-byte characters: about 1,100 fit beside a 500-character title, not the 224 a count in UTF-16 units left.
    const cjk = read(webPushPayload({ title: 'T'.repeat(500), message: '漢'.repeat(2000) }));
    expect(Array.from(cjk.message).length).toBeGreaterThan(1000);
    // Title, icon and url within the API's limits, too long together: the icon is left out, the title cut.
    const url = `https://app.example/${'u'.repeat(2020)}`;
    const full = webPushPayload({ title: '😀'.repeat(500), message: 'hi', icon: `https://cdn.example/${'i'.repeat(2020)}`, url });
    expect(full.length).toBeLessThanOrEqual(MAX_WEB_PUSH_PLAINTEXT);
    const shown = read(full);
    expect(shown.icon).toBeUndefined();
    expect(shown.url).toBe(url);
    expect(shown.title).not.toMatch(loneSurrogate);
    expect(Array.from(shown.title).length).toBeGreaterThan(400);
    expect(shown.title.endsWith('😀…')).toBe(true);
    // The icon alone would fit beside a short title: only the message gives way.
    const withIcon = read(webPushPayload({ title: 'Hi', message: 'm'.repeat(5000), icon: `https://cdn.example/${'i'.repeat(2020)}` }));
    expect(withIcon.icon).toBe(`https://cdn.example/${'i'.repeat(2020)}`);
    expect(withIcon.message.length).toBeGreaterThan(1800);
    // What fits is left whole.
    expect(read(webPushPayload({ title: 'Hi', message: 'there', url: 'https://app.example/x' }))).toEqual({ title: 'Hi', message: 'there', url: 'https://app.example/x' });
  });
});

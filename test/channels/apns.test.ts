import { randomBytes } from 'node:crypto';
import http2 from 'node:http2';
import net from 'node:net';
import { exportPKCS8, generateKeyPair } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApnsProvider, type ApnsCredentials } from '../../src/channels/push/apns.js';
import type { MobilePushMessage, PushToken } from '../../src/channels/push/types.js';
import { DeliveryError } from '../../src/channels/types.js';
import { type ApnsPeer, type TestCertificate, createTestCertificate, startApnsPeer } from '../helpers/apns-peer.js';
import { ManualClock } from '../helpers/context.js';
import { eventually } from '../helpers/wait.js';

const scope = { accountId: 'acc-1', envId: 'env-1' };
const deviceToken = () => randomBytes(32).toString('hex');
const apn = (token: string, environment?: string): PushToken => ({ type: 'APN', token, device: { device_id: 'iphone' }, ...(environment ? { environment } : {}) });
const hello: MobilePushMessage = { title: 'Hello', message: 'World' };

async function failureOf(promise: Promise<unknown>): Promise<DeliveryError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(DeliveryError);
    return err as DeliveryError;
  }
  throw new Error('expected the send to fail');
}

describe('APNs provider against a local HTTP/2 gateway', () => {
  let cert: TestCertificate;
  let clock: ManualClock;
  let production: ApnsPeer;
  let sandbox: ApnsPeer;
  let credentials: ApnsCredentials;
  let otherKeyPem: string;
  let provider: ApnsProvider;
  const nowSeconds = () => Math.floor(clock.now().getTime() / 1000);
  const newProvider = (creds: () => ApnsCredentials | null = () => credentials, extra: Partial<ConstructorParameters<typeof ApnsProvider>[0]> = {}) =>
    new ApnsProvider({ productionUrl: production.url, sandboxUrl: sandbox.url, ca: cert.cert, clock, credentials: async (s) => (s.envId === 'env-1' ? creds() : null), ...extra });

  beforeAll(async () => {
    cert = createTestCertificate();
    clock = new ManualClock();
    const keys = await generateKeyPair('ES256', { extractable: true });
    const other = await generateKeyPair('ES256', { extractable: true });
    otherKeyPem = await exportPKCS8(other.privateKey);
    credentials = { keyId: 'ABC123DEFG', teamId: 'TEAM123456', topic: 'com.example.app', privateKey: await exportPKCS8(keys.privateKey) };
    const peerOptions = { certificate: cert, publicKey: keys.publicKey, keyId: credentials.keyId, teamId: credentials.teamId, topic: credentials.topic, now: () => clock.now().getTime() };
    production = await startApnsPeer(peerOptions);
    sandbox = await startApnsPeer(peerOptions);
  });
  afterAll(async () => {
    await provider?.close();
    await production?.close();
    await sandbox?.close();
    cert?.dispose();
  });
  beforeEach(async () => {
    await provider?.close();
    provider = newProvider();
    production.requests.length = 0;
    sandbox.requests.length = 0;
  });

  it('sends the documented headers and payload, signed with an ES256 provider token', async () => {
    const token = deviceToken();
    const result = await provider.send(scope, apn(token, 'production'), {
      title: 'Order shipped',
      message: 'Your order #42 is on its way',
      customData: { orderId: '42', screen: 'orders' },
      apn: { expiry: 3600, priority: 10, collapseId: 'order-42', threadId: 'orders', badge: 3, sound: 'ping.caf' },
    });
    expect(production.requests).toHaveLength(1);
    const [req] = production.requests;
    expect(req.answer.status).toBe(200);
    expect(result.providerMessageId).toBe(req.answer.apnsId);
    expect(req.deviceToken).toBe(token);
    expect(req.headers[':path']).toBe(`/3/device/${token}`);
    const apnsHeaders = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith('apns-')));
    expect(apnsHeaders).toEqual({
      'apns-topic': 'com.example.app',
      'apns-push-type': 'alert',
      'apns-priority': '10',
      'apns-expiration': String(nowSeconds() + 3600),
      'apns-collapse-id': 'order-42',
    });
    expect(req.headers.authorization).toBe(`bearer ${req.jwt}`);
    expect(req.jwtHeader).toEqual({ alg: 'ES256', kid: 'ABC123DEFG' });
    expect(req.jwtClaims).toEqual({ iss: 'TEAM123456', iat: nowSeconds() });
    expect(JSON.parse(req.rawPayload)).toEqual({
      aps: { alert: { title: 'Order shipped', body: 'Your order #42 is on its way' }, badge: 3, sound: 'ping.caf', 'thread-id': 'orders' },
      orderId: '42',
      screen: 'orders',
    });
  });

  it('sends a silent background push with priority 5 and only content-available', async () => {
    await provider.send(scope, apn(deviceToken()), { title: '', message: '', customData: { sync: 'inbox' }, apn: { contentAvailable: true, priority: 10 } });
    const [req] = sandbox.requests;
    expect(req.answer.status).toBe(200);
    expect(req.headers['apns-push-type']).toBe('background');
    expect(req.headers['apns-priority']).toBe('5');
    expect(req.headers['apns-expiration']).toBeUndefined();
    expect(req.headers['apns-collapse-id']).toBeUndefined();
    expect(JSON.parse(req.rawPayload)).toEqual({ aps: { 'content-available': 1 }, sync: 'inbox' });
  });

  it('keeps an alert with content-available an alert, honours priority 5 and expiry 0', async () => {
    await provider.send(scope, apn(deviceToken()), { ...hello, customData: { aps: 'ignored' }, apn: { contentAvailable: true, priority: 5, expiry: 0 } });
    const [req] = sandbox.requests;
    expect(req.headers['apns-push-type']).toBe('alert');
    expect(req.headers['apns-priority']).toBe('5');
    expect(req.headers['apns-expiration']).toBe('0');
    expect(JSON.parse(req.rawPayload)).toEqual({ aps: { alert: { title: 'Hello', body: 'World' }, 'content-available': 1 } });
  });

  it('counts expiry from the send: every attempt carries the same apns-expiration, and none is made once it has passed', async () => {
    const token = deviceToken();
    const sentAt = clock.now().getTime();
    const attempt = (firstAttempt: boolean) => provider.send(scope, apn(token), { ...hello, apn: { expiry: 600 }, lifetimeStart: { atMs: sentAt, firstAttempt } });

    await attempt(true);
    clock.advance(5 * 60_000); // a retry five minutes later
    await attempt(false);
    clock.advance(4 * 60_000 + 59_000); // a second before the end
    await attempt(false);
    const deadline = String(Math.floor(sentAt / 1000) + 600);
    expect(sandbox.requests.map((r) => r.headers['apns-expiration'])).toEqual([deadline, deadline, deadline]);

    clock.advance(1_000); // the expiry has run out
    const err = await failureOf(attempt(false));
    expect(err.code).toBe('PUSH_EXPIRED');
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('options.apn.expiry');
    expect(sandbox.requests).toHaveLength(3);
  });

  it('expiry 0 (now or never) is sent on the first attempt only: a retry is not sent', async () => {
    const token = deviceToken();
    const lifetimeStart = { atMs: clock.now().getTime(), firstAttempt: true };
    await provider.send(scope, apn(token), { ...hello, apn: { expiry: 0 }, lifetimeStart });
    expect(sandbox.requests.map((r) => r.headers['apns-expiration'])).toEqual(['0']);

    clock.advance(10_000);
    const err = await failureOf(provider.send(scope, apn(token), { ...hello, apn: { expiry: 0 }, lifetimeStart: { ...lifetimeStart, firstAttempt: false } }));
    expect(err.code).toBe('PUSH_EXPIRED');
    expect(err.retryable).toBe(false);
    expect(sandbox.requests).toHaveLength(1);
  });

  it('picks the gateway by the token environment: production, else sandbox', async () => {
    await provider.send(scope, apn(deviceToken(), 'production'), hello);
    await provider.send(scope, apn(deviceToken(), 'sandbox'), hello);
    await provider.send(scope, apn(deviceToken(), 'undefined'), hello);
    await provider.send(scope, apn(deviceToken()), hello);
    expect(production.requests.map((r) => r.answer.status)).toEqual([200]);
    expect(sandbox.requests.map((r) => r.answer.status)).toEqual([200, 200, 200]);
  });

  it('reuses one HTTP/2 session per gateway and one provider token across sends, also concurrent ones', async () => {
    const before = production.sessionCount;
    await Promise.all(Array.from({ length: 20 }, () => provider.send(scope, apn(deviceToken(), 'production'), hello)));
    await provider.send(scope, apn(deviceToken(), 'production'), hello);
    expect(production.sessionCount - before).toBe(1);
    expect(new Set(production.requests.map((r) => r.session)).size).toBe(1);
    expect(new Set(production.requests.map((r) => r.jwt)).size).toBe(1);
    expect(production.requests.every((r) => r.answer.status === 200)).toBe(true);
  });

  it('reuses the provider token for 50 minutes, then signs a new one before APNs would refuse it', async () => {
    const t0 = nowSeconds();
    await provider.send(scope, apn(deviceToken()), hello);
    clock.advance(49 * 60_000);
    await provider.send(scope, apn(deviceToken()), hello);
    clock.advance(2 * 60_000);
    await provider.send(scope, apn(deviceToken()), hello);
    clock.advance(30 * 60_000);
    await provider.send(scope, apn(deviceToken()), hello);
    const r = sandbox.requests;
    expect(r.map((x) => x.answer.status)).toEqual([200, 200, 200, 200]);
    expect(r[1].jwt).toBe(r[0].jwt);
    expect(r[2].jwt).not.toBe(r[1].jwt);
    expect(r[2].jwtClaims?.iat).toBe(t0 + 51 * 60);
    expect(r[3].jwt).toBe(r[2].jwt);
  });

  it('a token kept past APNs\' hour is refused by the gateway (the peer enforces token age)', async () => {
    const lazy = newProvider(undefined, { tokenRefreshSeconds: 2 * 3600 });
    try {
      await lazy.send(scope, apn(deviceToken()), hello);
      clock.advance(61 * 60_000);
      // Refused once as expired, re-signed, accepted.
      await lazy.send(scope, apn(deviceToken()), hello);
      expect(sandbox.requests.map((x) => x.answer.reason ?? x.answer.status)).toEqual([200, 'ExpiredProviderToken', 200]);
    } finally {
      await lazy.close();
    }
  });

  it('on ExpiredProviderToken signs a new token and retries once', async () => {
    await provider.send(scope, apn(deviceToken()), hello);
    const oldJwt = sandbox.requests[0].jwt;
    clock.advance(10 * 60_000);
    sandbox.expireTokensIssuedBefore(nowSeconds());
    try {
      await provider.send(scope, apn(deviceToken()), hello);
    } finally {
      sandbox.expireTokensIssuedBefore(0);
    }
    const [, refused, retried] = sandbox.requests;
    expect(refused.jwt).toBe(oldJwt);
    expect(refused.answer).toMatchObject({ status: 403, reason: 'ExpiredProviderToken' });
    expect(retried.answer.status).toBe(200);
    expect(retried.jwt).not.toBe(oldJwt);
    expect(retried.jwtClaims?.iat).toBe(nowSeconds());
    expect(retried.rawPayload).toBe(refused.rawPayload);

    // Refused again after the retry: a permanent failure, and no third request.
    sandbox.requests.length = 0;
    sandbox.script('*', { status: 403, reason: 'ExpiredProviderToken' }, { status: 403, reason: 'ExpiredProviderToken' });
    const err = await failureOf(provider.send(scope, apn(deviceToken()), hello));
    expect(err.code).toBe('APNS_EXPIRED_PROVIDER_TOKEN');
    expect(err.retryable).toBe(false);
    expect(sandbox.requests).toHaveLength(2);
  });

  it('BadDeviceToken and Unregistered make the token invalid for good', async () => {
    const bad = await failureOf(provider.send(scope, apn('not-a-device-token'), hello));
    expect(bad).toMatchObject({ code: 'APNS_BAD_DEVICE_TOKEN', options: { retryable: false, recipientInvalid: true, recipient: 'not-a-device-token', providerCode: '400 BadDeviceToken' } });

    const gone = deviceToken();
    sandbox.unregister(gone);
    const unregistered = await failureOf(provider.send(scope, apn(gone), hello));
    expect(unregistered).toMatchObject({ code: 'APNS_UNREGISTERED', options: { retryable: false, recipientInvalid: true, recipient: gone, providerCode: '410 Unregistered' } });
    expect(sandbox.requests.map((r) => r.answer.status)).toEqual([400, 410]);
    // A token neither gateway knows was asked of both before it was called invalid.
    expect(production.requests.map((r) => [r.deviceToken, r.answer.status])).toEqual([['not-a-device-token', 400]]);
  });

  it("a token of the other environment (APNs: BadDeviceToken) is sent through the other gateway, not removed", async () => {
    // A development build's token filed as production: the production gateway does not know it.
    const devBuild = deviceToken();
    production.script(devBuild, { status: 400, reason: 'BadDeviceToken' });
    const result = await provider.send(scope, apn(devBuild, 'production'), hello);
    expect(result.accepted).toEqual([devBuild]);
    expect(result.response).toMatch(/^200 apns-id \S+ \(by the sandbox gateway: the token's environment names the other\)$/);
    // For the caller to file the token anew.
    expect(result.tokenEnvironment).toBe('sandbox');
    expect(production.requests.filter((r) => r.deviceToken === devBuild).map((r) => r.answer.status)).toEqual([400]);
    expect(sandbox.requests.filter((r) => r.deviceToken === devBuild).map((r) => r.answer.status)).toEqual([200]);
    // The same notification, signed by the same provider token, went to both.
    const [first, second] = [production.requests.at(-1)!, sandbox.requests.at(-1)!];
    expect(second.rawPayload).toBe(first.rawPayload);
    expect(second.jwt).toBe(first.jwt);

    // The other gateway failing for a while leaves the token alone: retried, not removed.
    const unsure = deviceToken();
    production.script(unsure, { status: 400, reason: 'BadDeviceToken' });
    sandbox.script(unsure, { status: 503, reason: 'ServiceUnavailable' });
    const err = await failureOf(provider.send(scope, apn(unsure, 'production'), hello));
    expect(err.retryable).toBe(true);
    expect(err.options.recipientInvalid).toBeFalsy();
  });

  it('429, 500 and 503 are transient', async () => {
    const token = deviceToken();
    sandbox.script(token, { status: 429, reason: 'TooManyRequests' }, { status: 500, reason: 'InternalServerError' }, { status: 503, reason: 'ServiceUnavailable' });
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const err = await failureOf(provider.send(scope, apn(token), hello));
      expect(err.retryable).toBe(true);
      expect(err.options.recipientInvalid).toBeFalsy();
      codes.push(err.code);
    }
    expect(codes).toEqual(['APNS_TOO_MANY_REQUESTS', 'APNS_INTERNAL_SERVER_ERROR', 'APNS_SERVICE_UNAVAILABLE']);
    // The gateway recovered: the same token goes through.
    await provider.send(scope, apn(token), hello);
    expect(sandbox.requests.at(-1)?.answer.status).toBe(200);
  });

  it('a key APNs does not know, or a topic the token is not for, fails permanently without touching the token', async () => {
    const wrongKey = newProvider(() => ({ ...credentials, privateKey: otherKeyPem }));
    const wrongTopic = newProvider(() => ({ ...credentials, topic: 'com.example.other' }));
    try {
      const invalidKey = await failureOf(wrongKey.send(scope, apn(deviceToken()), hello));
      expect(invalidKey).toMatchObject({ code: 'APNS_INVALID_PROVIDER_TOKEN', options: { retryable: false, providerCode: '403 InvalidProviderToken' } });
      expect(invalidKey.options.recipientInvalid).toBeFalsy();
      const notForTopic = await failureOf(wrongTopic.send(scope, apn(deviceToken()), hello));
      expect(notForTopic).toMatchObject({ code: 'APNS_DEVICE_TOKEN_NOT_FOR_TOPIC', options: { retryable: false } });
      expect(notForTopic.options.recipientInvalid).toBeFalsy();
    } finally {
      await wrongKey.close();
      await wrongTopic.close();
    }
  });

  it('without credentials the send is NOT_CONFIGURED and nothing is sent', async () => {
    const err = await failureOf(provider.send({ accountId: 'acc-1', envId: 'env-without-apns' }, apn(deviceToken()), hello));
    expect(err.code).toBe('NOT_CONFIGURED');
    expect(err.retryable).toBe(false);
    expect(sandbox.requests).toHaveLength(0);
  });

  it('shortens a long alert to fit 4 KB (body first, then title, between characters), and refuses what custom data alone makes too large', async () => {
    // The API's largest title and message, in a three-byte script: 13.5 KB as given.
    await provider.send(scope, apn(deviceToken()), { title: '題'.repeat(500), message: '本'.repeat(4000) });
    const [long] = sandbox.requests;
    expect(Buffer.byteLength(long.rawPayload)).toBeLessThanOrEqual(4096);
    expect(Buffer.byteLength(long.rawPayload)).toBeGreaterThan(4096 - 8);
    const alert = (long.payload.aps as { alert: { title: string; body: string } }).alert;
    expect(alert.body).toMatch(/^本+…$/);
    expect(alert.title).toBe('題'.repeat(500));
    // A 4,000-character title alone: the body goes, the title is cut.
    await provider.send(scope, apn(deviceToken()), { title: '😀'.repeat(2000), message: 'hi' });
    const titled = (sandbox.requests[1].payload.aps as { alert: { title: string; body: string } }).alert;
    expect(titled.body).toBe('');
    expect(titled.title).toMatch(/^(😀)+…$/u);
    // What fits is sent as given.
    await provider.send(scope, apn(deviceToken()), hello);
    expect(sandbox.requests[2].payload.aps).toMatchObject({ alert: { title: 'Hello', body: 'World' } });

    const err = await failureOf(provider.send(scope, apn(deviceToken()), { title: 'Data', message: 'x', customData: { blob: 'x'.repeat(5000) } }));
    expect(err.code).toBe('APNS_PAYLOAD_TOO_LARGE');
    expect(err.retryable).toBe(false);
    expect(sandbox.requests).toHaveLength(3);
  });

  it('replaces a session the gateway closed (GOAWAY), and fails over retryably when the gateway is unreachable', async () => {
    await provider.send(scope, apn(deviceToken()), hello);
    const first = sandbox.requests[0].session;
    await sandbox.goAway();
    await eventually(() => sandbox.openSessionCount === 0, 5000, 'the session to close');
    await provider.send(scope, apn(deviceToken()), hello);
    expect(sandbox.requests[1].answer.status).toBe(200);
    expect(sandbox.requests[1].session).toBeGreaterThan(first);

    const port = await freePort();
    const unreachable = newProvider(undefined, { sandboxUrl: `https://127.0.0.1:${port}` });
    try {
      const err = await failureOf(unreachable.send(scope, apn(deviceToken()), hello));
      expect(err.code).toBe('APNS_CONNECTION_FAILED');
      expect(err.retryable).toBe(true);
    } finally {
      await unreachable.close();
    }
  });

  it('close() cuts off a request the gateway never answers instead of waiting for it', async () => {
    // A gateway that takes the request and never answers; the provider's own timeout is far away.
    const silent = http2.createSecureServer({ cert: cert.cert, key: cert.key });
    const streams: http2.ServerHttp2Stream[] = [];
    silent.on('stream', (stream) => streams.push(stream));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const slow = newProvider(undefined, { sandboxUrl: `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}`, requestTimeoutMs: 10 * 60_000 });
    try {
      const sent = failureOf(slow.send(scope, apn(deviceToken()), hello));
      await eventually(() => streams.length === 1, 5000, 'the gateway to receive the request');
      // Without the cut-off, close() waits for the answer: this test's timeout fails first.
      await slow.close();
      expect((await sent).retryable).toBe(true);
    } finally {
      await slow.close();
      for (const stream of streams) stream.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('close() ends the HTTP/2 sessions', async () => {
    await provider.send(scope, apn(deviceToken(), 'production'), hello);
    await provider.send(scope, apn(deviceToken(), 'sandbox'), hello);
    expect(provider.sessionCount).toBe(2);
    await provider.close();
    expect(provider.sessionCount).toBe(0);
    await eventually(() => production.openSessionCount === 0 && sandbox.openSessionCount === 0, 5000, 'the gateway to see the sessions close');
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address() as net.AddressInfo;
      server.close(() => resolve(address.port));
    });
    server.on('error', reject);
  });
}

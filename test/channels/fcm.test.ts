import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createFcmProvider, type FcmProvider } from '../../src/channels/push/fcm.js';
import { FcmSettingsService } from '../../src/modules/push/fcm.service.js';
import type { PushToken } from '../../src/channels/push/types.js';
import { DeliveryError } from '../../src/channels/types.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { FCM_PEER_MAX_PAYLOAD_BYTES, FCM_SCOPE, type FcmPeer, generateServiceAccountKeys, receivedPayloadBytes, startFcmPeer } from '../helpers/fcm-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/** The credentials lookup the mobile push executor gives the provider: the environment's stored service account. */
const fcmCredentials = (t: { deps: ConstructorParameters<typeof FcmSettingsService>[0] }) => {
  const settings = new FcmSettingsService(t.deps);
  return (scope: Parameters<FcmSettingsService['credentials']>[0]) => settings.credentials(scope);
};

const fcm = (token: string): PushToken => ({ type: 'FCM', token, device: { device_id: `device-${token}`, platform: 'android' } });

/** The DeliveryError a send throws (fails the test when it resolves). */
async function failure(promise: Promise<unknown>): Promise<DeliveryError> {
  const err = await promise.then(
    (value) => {
      throw new Error(`expected a DeliveryError, got ${JSON.stringify(value)}`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DeliveryError);
  return err as DeliveryError;
}

describe.each(STORAGE_KINDS)('FCM HTTP v1 provider against a local FCM peer (%s)', (kind) => {
  const keys = generateServiceAccountKeys();
  let clock: ManualClock;
  let peer: FcmPeer;
  let t: TestContext;
  let provider: FcmProvider;
  let scope: { accountId: string; envId: string };
  let uploaded: Record<string, unknown>;

  const putSettings = (fcmConfig: unknown, auth = t.auth) =>
    t.app.inject({ method: 'PUT', url: '/settings/push/fcm', headers: auth, payload: { fcmConfig: typeof fcmConfig === 'string' ? fcmConfig : JSON.stringify(fcmConfig) } });

  beforeAll(async () => {
    clock = new ManualClock(new Date());
    peer = await startFcmPeer({ publicKey: keys.publicKey, now: () => clock.now() });
    t = await createTestContext(kind, { clock, config: { allowPrivateNetworks: true, fcmBaseUrl: peer.url } });
    scope = { accountId: t.account.accountId, envId: t.account.clientId };
    uploaded = peer.serviceAccount(keys.privateKey);
    expect((await putSettings(uploaded)).statusCode).toBe(200);
  });
  afterAll(async () => {
    await provider?.close();
    await t?.close();
    await peer?.close();
  });
  beforeEach(async () => {
    await provider?.close();
    // A fresh provider per test: an empty token cache.
    provider = createFcmProvider(t.deps, fcmCredentials(t));
    peer.tokenRequests.length = 0;
    peer.refusedTokenRequests.length = 0;
    peer.sends.length = 0;
    peer.unauthenticated = 0;
  });

  it('sends notification, data and android options as the exact FCM v1 body and returns the message name', async () => {
    const result = await provider.send(scope, fcm('device-token-1'), {
      title: 'Your order shipped',
      message: 'Order #42 is on its way',
      customData: { orderId: '42', screen: 'orders' },
      fcm: { android: { collapseKey: 'order-42', priority: 'high', ttl: 3600, restrictedPackageName: 'com.example.shop' } },
    });

    expect(peer.sends).toHaveLength(1);
    const [sent] = peer.sends;
    expect(sent.project).toBe(peer.projectId);
    expect(sent.body).toEqual({
      message: {
        token: 'device-token-1',
        notification: { title: 'Your order shipped', body: 'Order #42 is on its way' },
        data: { orderId: '42', screen: 'orders' },
        android: { collapse_key: 'order-42', priority: 'HIGH', ttl: '3600s', restricted_package_name: 'com.example.shop' },
      },
    });
    expect(sent.name).toMatch(new RegExp(`^projects/${peer.projectId}/messages/`));
    expect(result.providerMessageId).toBe(sent.name);

    // The access token came from a JWT-bearer grant signed with the service account's key.
    expect(peer.tokenRequests).toHaveLength(1);
    const { claims, header } = peer.tokenRequests[0];
    expect(header).toMatchObject({ alg: 'RS256', typ: 'JWT', kid: uploaded.private_key_id });
    expect(claims).toMatchObject({ iss: peer.clientEmail, aud: peer.tokenUri, scope: FCM_SCOPE });
    expect(claims.iat).toBe(Math.floor(clock.now().getTime() / 1000));
    expect((claims.exp as number) - (claims.iat as number)).toBe(3600);
    expect(sent.accessToken).toBe(peer.tokenRequests[0].accessToken);
  });

  it('leaves out data and android when the message has none, and maps normal priority and fractional ttl', async () => {
    await provider.send(scope, fcm('device-token-2'), { title: 'Hi', message: 'Plain' });
    await provider.send(scope, fcm('device-token-2'), { title: 'Hi', message: 'Low', fcm: { android: { priority: 'normal', ttl: 2.5 } } });
    expect(peer.sends.map((s) => s.body)).toEqual([
      { message: { token: 'device-token-2', notification: { title: 'Hi', body: 'Plain' } } },
      { message: { token: 'device-token-2', notification: { title: 'Hi', body: 'Low' }, android: { priority: 'NORMAL', ttl: '2.5s' } } },
    ]);
  });

  it('counts android.ttl from the send: a retry carries what is left, and none is made once it has run out', async () => {
    const sentAt = clock.now().getTime();
    const attempt = (firstAttempt: boolean) =>
      provider.send(scope, fcm('ttl-token'), { title: 't', message: 'm', fcm: { android: { ttl: 600 } }, lifetimeStart: { atMs: sentAt, firstAttempt } });

    await attempt(true);
    clock.advance(4 * 60_000); // a retry four minutes later
    await attempt(false);
    clock.advance(1_500);
    await attempt(false);
    expect(peer.sends.map((s) => (s.body.message.android as { ttl: string }).ttl)).toEqual(['600s', '360s', '358.5s']);
    expect(peer.sends.every((s) => s.status === 200)).toBe(true);

    clock.advance(358_500); // the ttl has run out
    const err = await failure(attempt(false));
    expect(err.code).toBe('PUSH_EXPIRED');
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('options.fcm.android.ttl');
    expect(peer.sends).toHaveLength(3);
  });

  it('carries options.apn to iOS through FCM: expiry counted from the send, priority, collapse id, aps keys with the alert', async () => {
    const sentAt = clock.now().getTime();
    const apn = { expiry: 600, priority: 5, collapseId: 'order-42', badge: 3, sound: 'ping.caf', threadId: 'orders', contentAvailable: true };
    const attempt = (firstAttempt: boolean) => provider.send(scope, fcm('ios-token'), { title: 'Shipped', message: 'On its way', apn, dedupeKey: 'tracking-1', lifetimeStart: { atMs: sentAt, firstAttempt } });

    await attempt(true);
    clock.advance(4 * 60_000); // a retry four minutes later carries the same absolute expiry
    await attempt(false);
    const deadline = String(Math.floor(sentAt / 1000) + 600);
    const apns = {
      headers: { 'apns-collapse-id': 'order-42', 'apns-expiration': deadline, 'apns-priority': '5' },
      // FCM's apns payload replaces the notification's title and body on iOS: the alert travels with it.
      payload: { aps: { alert: { title: 'Shipped', body: 'On its way' }, badge: 3, sound: 'ping.caf', 'thread-id': 'orders', 'content-available': 1 } },
    };
    expect(peer.sends.map((s) => s.body.message.apns)).toEqual([apns, apns]);
    expect(peer.sends.every((s) => s.status === 200)).toBe(true);

    // Run out: an FCM token may be an Android device's, so the push still goes, with an iOS lifetime of "now or never".
    clock.advance(6 * 60_000);
    await attempt(false);
    expect(peer.sends[2].body.message.apns).toMatchObject({ headers: { 'apns-expiration': '0' } });
    expect(peer.sends[2].status).toBe(200);
  });

  it('without options.apn the apns part is only the delivery\'s collapse id, or absent', async () => {
    await provider.send(scope, fcm('plain-ios'), { title: 't', message: 'm', dedupeKey: 'tracking-2' });
    await provider.send(scope, fcm('plain-ios'), { title: 't', message: 'm' });
    expect(peer.sends.map((s) => s.body.message.apns)).toEqual([{ headers: { 'apns-collapse-id': 'tracking-2' } }, undefined]);
  });

  it('ttl 0 (now or never) is sent as "0s" on the first attempt only: a retry is not sent', async () => {
    const lifetimeStart = { atMs: clock.now().getTime(), firstAttempt: true };
    const message = { title: 't', message: 'm', fcm: { android: { ttl: 0 } } };
    await provider.send(scope, fcm('now-or-never'), { ...message, lifetimeStart });
    expect((peer.sends[0].body.message.android as { ttl: string }).ttl).toBe('0s');

    clock.advance(5_000);
    const err = await failure(provider.send(scope, fcm('now-or-never'), { ...message, lifetimeStart: { ...lifetimeStart, firstAttempt: false } }));
    expect(err.code).toBe('PUSH_EXPIRED');
    expect(peer.sends).toHaveLength(1);
  });

  it('shortens a notification over FCM\'s 4096-byte payload (body first, then title) so FCM takes it', async () => {
    // The API takes a 500-character title and a 4,000-character message: far more than 4096 bytes in UTF-8.
    const title = 'Ü'.repeat(500);
    const body = 'ä'.repeat(4000);
    await provider.send(scope, fcm('long-text'), { title, message: body, customData: { orderId: '42' } });
    const [sent] = peer.sends;
    expect(sent.status).toBe(200);
    const notification = sent.body.message.notification as { title: string; body: string };
    expect(notification.title).toBe(title);
    expect(notification.body).toMatch(/^ä+…$/);
    expect(sent.body.message.data).toEqual({ orderId: '42' });
    const bytes = receivedPayloadBytes(sent.body.message);
    expect(bytes).toBeLessThanOrEqual(FCM_PEER_MAX_PAYLOAD_BYTES);
    // As long as fits: one more character would not.
    expect(bytes + Buffer.byteLength('ä')).toBeGreaterThan(FCM_PEER_MAX_PAYLOAD_BYTES);

    // A body too long even alone takes the title with it, shortened after the body is gone.
    peer.sends.length = 0;
    await provider.send(scope, fcm('long-text'), { title: 'T'.repeat(5000), message: 'x'.repeat(4000) });
    const shortened = peer.sends[0].body.message.notification as { title: string; body: string };
    expect(peer.sends[0].status).toBe(200);
    expect(shortened.body).toBe('');
    expect(shortened.title).toMatch(/^T+…$/);
  });

  it('the peer refuses a payload over 4096 bytes as FCM does; custom data alone that large fails FCM_PAYLOAD_TOO_LARGE without a request', async () => {
    await provider.send(scope, fcm('size-probe'), { title: 't', message: 'm' });
    const accessToken = peer.sends[0].accessToken;
    const post = (message: Record<string, unknown>) =>
      fetch(`${peer.url}/v1/projects/${peer.projectId}/messages:send`, {
        method: 'POST',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ message: { token: 'size-probe', ...message } }),
      });
    const tooBig = await post({ notification: { title: 't', body: 'x'.repeat(4096) } });
    expect(tooBig.status).toBe(400);
    expect(await tooBig.json()).toMatchObject({ error: { status: 'INVALID_ARGUMENT', message: 'Android message is too big' } });
    expect((await post({ notification: { title: 't', body: 'x'.repeat(4000) } })).status).toBe(200);

    peer.sends.length = 0;
    const err = await failure(provider.send(scope, fcm('size-probe'), { title: 't', message: 'm', customData: { blob: 'b'.repeat(4100) } }));
    expect(err.code).toBe('FCM_PAYLOAD_TOO_LARGE');
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('options.push.customData');
    expect(peer.sends).toHaveLength(0);
  });

  it('reuses one access token for many sends (also concurrent ones) and renews it shortly before it expires', async () => {
    await Promise.all([1, 2, 3].map((n) => provider.send(scope, fcm(`concurrent-${n}`), { title: 't', message: `m${n}` })));
    await provider.send(scope, fcm('later'), { title: 't', message: 'm' });
    expect(peer.tokenRequests).toHaveLength(1);
    expect(new Set(peer.sends.map((s) => s.accessToken)).size).toBe(1);

    // The peer's tokens live 3599 s; the provider stops using one 60 s before that.
    clock.advance(3500 * 1000);
    await provider.send(scope, fcm('still-valid'), { title: 't', message: 'm' });
    expect(peer.tokenRequests).toHaveLength(1);

    clock.advance(40 * 1000); // 3540 s: inside the renewal margin
    await provider.send(scope, fcm('renewed'), { title: 't', message: 'm' });
    expect(peer.tokenRequests).toHaveLength(2);
    expect(peer.sends.at(-1)!.accessToken).toBe(peer.tokenRequests[1].accessToken);
    expect(peer.tokenRequests[1].claims.iat).toBe(Math.floor(clock.now().getTime() / 1000));
    expect(peer.unauthenticated).toBe(0);
  });

  it('drops the access token on a 401 and retries once with a new one', async () => {
    await provider.send(scope, fcm('before-revoke'), { title: 't', message: 'm' });
    peer.revokeAccessTokens();
    const result = await provider.send(scope, fcm('after-revoke'), { title: 't', message: 'm' });
    expect(peer.unauthenticated).toBe(1);
    expect(peer.tokenRequests).toHaveLength(2);
    expect(result.providerMessageId).toBe(peer.sends.at(-1)!.name);
    expect(peer.sends.at(-1)!.accessToken).toBe(peer.tokenRequests[1].accessToken);

    // The new token is cached in turn.
    await provider.send(scope, fcm('after-revoke-2'), { title: 't', message: 'm' });
    expect(peer.tokenRequests).toHaveLength(2);
  });

  it('fails permanently (FCM_AUTH_FAILED) when FCM still answers 401 with a fresh token', async () => {
    peer.fail('always-401', 'UNAUTHENTICATED');
    const err = await failure(provider.send(scope, fcm('always-401'), { title: 't', message: 'm' }));
    expect(err.code).toBe('FCM_AUTH_FAILED');
    expect(err.retryable).toBe(false);
    expect(peer.tokenRequests).toHaveLength(2);
    expect(peer.sends.filter((s) => s.body.message.token === 'always-401')).toHaveLength(2);
  });

  it('UNREGISTERED (404) marks the token invalid', async () => {
    peer.fail('gone-token', 'UNREGISTERED');
    const err = await failure(provider.send(scope, fcm('gone-token'), { title: 't', message: 'm' }));
    expect(err.code).toBe('FCM_UNREGISTERED');
    expect(err.options).toMatchObject({ retryable: false, recipientInvalid: true, recipient: 'gone-token', providerCode: 'UNREGISTERED' });
  });

  it('INVALID_ARGUMENT about the token marks it invalid; about the payload it is a permanent failure that keeps the token', async () => {
    peer.fail('malformed-token', 'INVALID_ARGUMENT');
    const bad = await failure(provider.send(scope, fcm('malformed-token'), { title: 't', message: 'm' }));
    expect(bad.code).toBe('FCM_INVALID_TOKEN');
    expect(bad.options).toMatchObject({ retryable: false, recipientInvalid: true, recipient: 'malformed-token', providerCode: 'INVALID_ARGUMENT' });

    // FCM refuses reserved data keys ("from"): the payload is wrong, not the token.
    const payload = await failure(provider.send(scope, fcm('good-token'), { title: 't', message: 'm', customData: { from: 'me' } }));
    expect(payload.code).toBe('FCM_INVALID_ARGUMENT');
    expect(payload.retryable).toBe(false);
    expect(payload.options.recipientInvalid).toBeFalsy();
    expect(payload.message).toContain('from');
  });

  it('QUOTA_EXCEEDED (429) is retryable after Retry-After seconds', async () => {
    peer.fail('busy-token', 'QUOTA_EXCEEDED', { retryAfter: '30', times: 1 });
    const err = await failure(provider.send(scope, fcm('busy-token'), { title: 't', message: 'm' }));
    expect(err.code).toBe('FCM_QUOTA_EXCEEDED');
    expect(err.options).toMatchObject({ retryable: true, retryAfterMs: 30_000, providerCode: 'QUOTA_EXCEEDED' });
    expect(err.options.recipientInvalid).toBeFalsy();
    // The quota answer was for one request only: the retry goes through.
    expect((await provider.send(scope, fcm('busy-token'), { title: 't', message: 'm' })).providerMessageId).toBe(peer.sends.at(-1)!.name);
  });

  it('5xx is retryable, honouring an HTTP-date Retry-After against the clock', async () => {
    const when = new Date(Math.ceil((clock.now().getTime() + 120_000) / 1000) * 1000);
    peer.fail('flaky-500', 'INTERNAL', { retryAfter: when.toUTCString() });
    const internal = await failure(provider.send(scope, fcm('flaky-500'), { title: 't', message: 'm' }));
    expect(internal.code).toBe('FCM_UNAVAILABLE');
    expect(internal.options).toMatchObject({ retryable: true, providerCode: 'INTERNAL', retryAfterMs: when.getTime() - clock.now().getTime() });

    peer.fail('flaky-503', 'UNAVAILABLE');
    const unavailable = await failure(provider.send(scope, fcm('flaky-503'), { title: 't', message: 'm' }));
    expect(unavailable.code).toBe('FCM_UNAVAILABLE');
    expect(unavailable.retryable).toBe(true);
    expect(unavailable.options.retryAfterMs).toBeUndefined();

    // A Retry-After that is neither delay-seconds nor an HTTP date is none (Date.parse read May 5 as a day of 2001).
    peer.fail('flaky-odd', 'INTERNAL', { retryAfter: 'May 5' });
    expect((await failure(provider.send(scope, fcm('flaky-odd'), { title: 't', message: 'm' }))).options.retryAfterMs).toBeUndefined();
  });

  it('SENDER_ID_MISMATCH (403) is permanent and keeps the token', async () => {
    peer.fail('other-sender', 'SENDER_ID_MISMATCH');
    const err = await failure(provider.send(scope, fcm('other-sender'), { title: 't', message: 'm' }));
    expect(err.code).toBe('FCM_SENDER_ID_MISMATCH');
    expect(err.retryable).toBe(false);
    expect(err.options.recipientInvalid).toBeFalsy();
  });

  it('THIRD_PARTY_AUTH_ERROR (401) is permanent and does not renew the access token', async () => {
    peer.fail('apns-cert', 'THIRD_PARTY_AUTH_ERROR');
    const err = await failure(provider.send(scope, fcm('apns-cert'), { title: 't', message: 'm' }));
    expect(err.code).toBe('FCM_THIRD_PARTY_AUTH_ERROR');
    expect(err.retryable).toBe(false);
    expect(peer.tokenRequests).toHaveLength(1);
  });

  it('an environment without credentials fails with NOT_CONFIGURED, permanently, without any request', async () => {
    const other = await t.newAccount('No FCM');
    const err = await failure(provider.send({ accountId: other.accountId, envId: other.clientId }, fcm('x'), { title: 't', message: 'm' }));
    expect(err.code).toBe('NOT_CONFIGURED');
    expect(err.retryable).toBe(false);
    // Scoped by account: another account cannot use this environment's credentials.
    const foreign = await failure(provider.send({ accountId: other.accountId, envId: t.account.clientId }, fcm('x'), { title: 't', message: 'm' }));
    expect(foreign.code).toBe('NOT_CONFIGURED');
    expect(peer.tokenRequests).toHaveLength(0);
    expect(peer.sends).toHaveLength(0);
  });

  it('a service account whose key the token endpoint does not accept fails permanently with FCM_AUTH_FAILED', async () => {
    const other = await t.newAccount('Wrong key');
    const auth = { authorization: `Bearer ${other.apiKey}` };
    const stranger = generateServiceAccountKeys();
    expect((await putSettings(peer.serviceAccount(stranger.privateKey), auth)).statusCode).toBe(200);
    const err = await failure(provider.send({ accountId: other.accountId, envId: other.clientId }, fcm('x'), { title: 't', message: 'm' }));
    expect(err.code).toBe('FCM_AUTH_FAILED');
    expect(err.options).toMatchObject({ retryable: false, providerCode: 'invalid_grant' });
    expect(peer.refusedTokenRequests[0]).toMatch(/signature/i);
    expect(peer.sends).toHaveLength(0);
  });

  it('uses new credentials as soon as they replace the old ones', async () => {
    const other = await t.newAccount('Rotating');
    const auth = { authorization: `Bearer ${other.apiKey}` };
    const otherScope = { accountId: other.accountId, envId: other.clientId };
    expect((await putSettings(peer.serviceAccount(keys.privateKey), auth)).statusCode).toBe(200);
    await provider.send(otherScope, fcm('r1'), { title: 't', message: 'm' });
    await provider.send(otherScope, fcm('r2'), { title: 't', message: 'm' });
    expect(peer.tokenRequests).toHaveLength(1);
    // Same key uploaded again (a rotation of the file): a new token, not the cached one.
    expect((await putSettings(peer.serviceAccount(keys.privateKey), auth)).statusCode).toBe(200);
    await provider.send(otherScope, fcm('r3'), { title: 't', message: 'm' });
    expect(peer.tokenRequests).toHaveLength(2);
    // Per environment: the first environment's token is its own.
    await provider.send(scope, fcm('r4'), { title: 't', message: 'm' });
    expect(peer.tokenRequests).toHaveLength(3);
    await t.app.inject({ method: 'DELETE', url: '/settings/push/fcm', headers: auth });
    expect((await failure(provider.send(otherScope, fcm('r5'), { title: 't', message: 'm' }))).code).toBe('NOT_CONFIGURED');
  });

  it('refuses a loopback token_uri unless private networks are allowed (SSRF guard)', async () => {
    const guarded = createFcmProvider({ ...t.deps, config: { ...t.deps.config, allowPrivateNetworks: false } }, fcmCredentials(t));
    try {
      const err = await failure(guarded.send(scope, fcm('x'), { title: 't', message: 'm' }));
      expect(err.code).toBe('FCM_TOKEN_URI_BLOCKED');
      expect(err.retryable).toBe(false);
      expect(peer.tokenRequests).toHaveLength(0);
      expect(peer.refusedTokenRequests).toHaveLength(0);
    } finally {
      await guarded.close();
    }
  });

  it('a bare 404 (wrong FCM base URL) is a permanent failure that does not remove the token', async () => {
    const misrouted = createFcmProvider(t.deps, fcmCredentials(t), { baseUrl: `${peer.url}/not-fcm` });
    try {
      const err = await failure(misrouted.send(scope, fcm('keep-me'), { title: 't', message: 'm' }));
      expect(err.code).toBe('FCM_ERROR');
      expect(err.retryable).toBe(false);
      expect(err.options.recipientInvalid).toBeFalsy();
      expect(err.options.providerCode).toBe('NOT_FOUND');
    } finally {
      await misrouted.close();
    }
  });

  it('connection failures are retryable', async () => {
    const unreachable = createFcmProvider({ ...t.deps, config: { ...t.deps.config, fcmBaseUrl: 'http://127.0.0.1:1' } }, fcmCredentials(t));
    try {
      const err = await failure(unreachable.send(scope, fcm('x'), { title: 't', message: 'm' }));
      expect(err.code).toBe('FCM_CONNECTION_FAILED');
      expect(err.retryable).toBe(true);
    } finally {
      await unreachable.close();
    }
  });
});

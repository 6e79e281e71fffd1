import { randomBytes } from 'node:crypto';
import { exportPKCS8, generateKeyPair } from 'jose';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApnsPeer, type TestCertificate, createTestCertificate, startApnsPeer } from '../helpers/apns-peer.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type FcmPeer, generateServiceAccountKeys, startFcmPeer } from '../helpers/fcm-peer.js';
import { type PushEndpoint, startPushEndpoint } from '../helpers/push-endpoint.js';
import { eventually } from '../helpers/wait.js';

const apnToken = () => randomBytes(32).toString('hex');
const fcmToken = () => `fcm-${randomBytes(24).toString('base64url')}`;
const apn = (token: string) => ({ type: 'APN', token, device: { device_id: `dev-${token.slice(0, 6)}` } });
const fcm = (token: string) => ({ type: 'FCM', token, device: { device_id: `dev-${token.slice(4, 10)}` } });

// A push's lifetime counts from the send, so the test moves the clock between a delivery's
// attempts. The embedded queue runs retries on the injected clock; pg-boss compares with the
// database server's clock, which a test cannot move, so this runs on SQLite only.
describe('send: push expiry counts from the send, across retries (sqlite, manual clock)', () => {
  const clock = new ManualClock(new Date());
  let t: TestContext;
  let cert: TestCertificate;
  let gateway: ApnsPeer;
  let firebase: FcmPeer;
  let browsers: PushEndpoint;

  const send = async (payload: unknown) => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
    expect(res.statusCode).toBe(200);
    return res.json().trackingId as string;
  };
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] ? log(trackingId) : undefined), 15_000, field);
  const attempts = async (trackingId: string) =>
    (
      await sql<{ outcome: string; provider_code: string | null }>`
        select a.outcome, a.provider_code from delivery_attempts a join deliveries d on d.id = a.delivery_id
        where d.tracking_id = ${trackingId} order by a.attempt`.execute(t.deps.db)
    ).rows;
  /** Waits for the first attempt to be recorded as one to retry; the retry is then due on the clock. */
  const firstAttemptFailed = (trackingId: string) => eventually(async () => ((await attempts(trackingId)).length === 1 ? true : undefined), 15_000, 'the first attempt');
  const receivedAt = async (trackingId: string) => new Date((await log(trackingId)).received_at).getTime();

  beforeAll(async () => {
    cert = createTestCertificate();
    const apnKeys = await generateKeyPair('ES256', { extractable: true });
    const apnConfig = { KeyId: 'ABC123DEFG', Key: await exportPKCS8(apnKeys.privateKey), TeamId: 'TEAM123456', Topic: 'com.example.app' };
    gateway = await startApnsPeer({ certificate: cert, publicKey: apnKeys.publicKey, keyId: apnConfig.KeyId, teamId: apnConfig.TeamId, topic: apnConfig.Topic, now: () => clock.now().getTime() });
    const fcmKeys = generateServiceAccountKeys();
    firebase = await startFcmPeer({ publicKey: fcmKeys.publicKey, now: () => clock.now() });
    browsers = await startPushEndpoint({ now: () => Math.floor(clock.now().getTime() / 1000) });
    t = await createTestContext('sqlite', {
      workers: true,
      clock,
      config: {
        allowPrivateNetworks: true,
        apnsProductionUrl: gateway.url,
        apnsSandboxUrl: gateway.url,
        apnsCaFile: cert.certFile,
        fcmBaseUrl: firebase.url,
        webPushTtlSeconds: 600,
      },
    });
    expect((await t.app.inject({ method: 'PUT', url: '/settings/push/apn', headers: t.auth, payload: apnConfig })).statusCode).toBe(200);
    const fcmConfig = JSON.stringify(firebase.serviceAccount(fcmKeys.privateKey));
    expect((await t.app.inject({ method: 'PUT', url: '/settings/push/fcm', headers: t.auth, payload: { fcmConfig } })).statusCode).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await gateway?.close();
    await firebase?.close();
    await browsers?.close();
    cert?.dispose();
  });

  it('APNs: a retry five minutes later carries the same absolute apns-expiration as the first attempt', async () => {
    const token = apnToken();
    gateway.script(token, { status: 503, reason: 'ServiceUnavailable' });
    const trackingId = await send({ type: 'apns_expiry', to: { id: 'ios-expiry', pushTokens: [apn(token)] }, mobile_push: { title: 't', message: 'm' }, options: { apn: { expiry: 600 } } });
    await firstAttemptFailed(trackingId);
    clock.advance(5 * 60_000);
    const record = await settled(trackingId, 'mobile_push_sent_at');
    expect(record.mobile_push_sent_token).toBe(token);

    const sent = gateway.requests.filter((r) => r.deviceToken === token);
    expect(sent.map((r) => r.answer.status)).toEqual([503, 200]);
    const deadline = String(Math.floor((await receivedAt(trackingId)) / 1000) + 600);
    expect(sent.map((r) => r.headers['apns-expiration'])).toEqual([deadline, deadline]);
  });

  it('APNs: a retry after the expiry has run out is not sent, and the delivery fails PUSH_EXPIRED', async () => {
    const token = apnToken();
    gateway.script(token, { status: 503, reason: 'ServiceUnavailable' });
    const trackingId = await send({ type: 'apns_expired', to: { id: 'ios-expired', pushTokens: [apn(token)] }, mobile_push: { title: 't', message: 'm' }, options: { apn: { expiry: 60 } } });
    await firstAttemptFailed(trackingId);
    clock.advance(2 * 60_000);
    const record = await settled(trackingId, 'mobile_push_failed_at');
    expect(record.mobile_push_failed_code).toBe('PUSH_EXPIRED');
    expect(record.mobile_push_sent_at).toBeUndefined();
    expect(gateway.requests.filter((r) => r.deviceToken === token).map((r) => r.answer.status)).toEqual([503]);
    expect(await attempts(trackingId)).toEqual([
      { outcome: 'retry', provider_code: '503 ServiceUnavailable' },
      { outcome: 'failed', provider_code: 'PUSH_EXPIRED' },
    ]);
  });

  it('FCM: android.ttl shrinks by the time the retry waited', async () => {
    const token = fcmToken();
    firebase.fail(token, 'QUOTA_EXCEEDED', { retryAfter: '240', times: 1 });
    const trackingId = await send({ type: 'fcm_ttl', to: { id: 'android-ttl', pushTokens: [fcm(token)] }, mobile_push: { title: 't', message: 'm' }, options: { fcm: { android: { ttl: 600 } } } });
    await firstAttemptFailed(trackingId);
    clock.advance(240_000);
    await settled(trackingId, 'mobile_push_sent_at');
    const sent = firebase.sends.filter((s) => s.body.message.token === token);
    expect(sent.map((s) => s.status)).toEqual([429, 200]);
    expect(sent.map((s) => (s.body.message.android as { ttl: string }).ttl)).toEqual(['600s', '360s']);
  });

  it('FCM: a retry after the ttl has run out is not sent, and the delivery fails PUSH_EXPIRED', async () => {
    const token = fcmToken();
    firebase.fail(token, 'QUOTA_EXCEEDED', { retryAfter: '120', times: 1 });
    const trackingId = await send({ type: 'fcm_expired', to: { id: 'android-expired', pushTokens: [fcm(token)] }, mobile_push: { title: 't', message: 'm' }, options: { fcm: { android: { ttl: 60 } } } });
    await firstAttemptFailed(trackingId);
    clock.advance(120_000);
    const record = await settled(trackingId, 'mobile_push_failed_at');
    expect(record.mobile_push_failed_code).toBe('PUSH_EXPIRED');
    expect(firebase.sends.filter((s) => s.body.message.token === token).map((s) => s.status)).toEqual([429]);
  });

  it('FCM: a scheduled send counts its ttl from its schedule, not from when it was accepted', async () => {
    const token = fcmToken();
    const at = new Date(clock.now().getTime() + 3600_000);
    const trackingId = await send({
      type: 'fcm_scheduled',
      to: { id: 'android-scheduled', pushTokens: [fcm(token)] },
      mobile_push: { title: 't', message: 'm' },
      options: { fcm: { android: { ttl: 600 } } },
      schedule: at.toISOString(),
    });
    clock.set(at);
    await settled(trackingId, 'mobile_push_sent_at');
    expect(firebase.sends.filter((s) => s.body.message.token === token).map((s) => (s.body.message.android as { ttl: string }).ttl)).toEqual(['600s']);
  });

  it('web push: the TTL (CLARION_WEB_PUSH_TTL) shrinks by the time the retry waited; past it the retry is not sent', async () => {
    const [patient, late] = [browsers.subscribe(), browsers.subscribe()];
    browsers.answer(patient, 429, { times: 1, retryAfter: '240' });
    browsers.answer(late, 429, { times: 1, retryAfter: '900' });
    const identify = (id: string, sub: typeof patient) => t.app.inject({ method: 'POST', url: `/users/${id}`, headers: t.auth, payload: { id, webPushTokens: [{ sub: sub.sub }] } });
    expect((await identify('wp-patient', patient)).statusCode).toBe(200);
    expect((await identify('wp-late', late)).statusCode).toBe(200);

    const shrinking = await send({ type: 'wp_ttl', to: { id: 'wp-patient' }, web_push: { title: 't', message: 'm' } });
    await firstAttemptFailed(shrinking);
    clock.advance(240_000);
    await settled(shrinking, 'web_push_sent_at');
    expect(browsers.received.filter((r) => r.subscriptionId === patient.id).map((r) => [r.status, r.ttl])).toEqual([
      [429, 600],
      [201, 360],
    ]);

    const expiring = await send({ type: 'wp_ttl', to: { id: 'wp-late' }, web_push: { title: 't', message: 'm' } });
    await firstAttemptFailed(expiring);
    clock.advance(900_000);
    const record = await settled(expiring, 'web_push_failed_at');
    expect(record.web_push_failed_code).toBe('PUSH_EXPIRED');
    expect(browsers.received.filter((r) => r.subscriptionId === late.id).map((r) => r.status)).toEqual([429]);
  });
});

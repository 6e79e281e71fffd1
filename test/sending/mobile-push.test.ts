import { randomBytes } from 'node:crypto';
import { exportPKCS8, generateKeyPair } from 'jose';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ApnsPeer, type TestCertificate, createTestCertificate, startApnsPeer } from '../helpers/apns-peer.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const deviceToken = () => randomBytes(32).toString('hex');
const apn = (token: string, environment?: string) => ({ type: 'APN', token, device: { device_id: `dev-${token.slice(0, 6)}` }, ...(environment ? { environment } : {}) });

describe.each(STORAGE_KINDS)('send: mobile push over APNs end to end (%s)', (kind) => {
  let t: TestContext;
  let cert: TestCertificate;
  let production: ApnsPeer;
  let sandbox: ApnsPeer;
  let apnConfig: { KeyId: string; Key: string; TeamId: string; Topic: string };
  const send = (payload: unknown) => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] ? log(trackingId) : undefined), 15_000, field);
  const user = async (id: string) => (await t.app.inject({ method: 'GET', url: `/users/${id}`, headers: t.auth })).json();
  const putApn = () => t.app.inject({ method: 'PUT', url: '/settings/push/apn', headers: t.auth, payload: apnConfig });

  beforeAll(async () => {
    cert = createTestCertificate();
    const keys = await generateKeyPair('ES256', { extractable: true });
    apnConfig = { KeyId: 'ABC123DEFG', Key: await exportPKCS8(keys.privateKey), TeamId: 'TEAM123456', Topic: 'com.example.app' };
    const peer = { certificate: cert, publicKey: keys.publicKey, keyId: apnConfig.KeyId, teamId: apnConfig.TeamId, topic: apnConfig.Topic };
    production = await startApnsPeer(peer);
    sandbox = await startApnsPeer(peer);
    t = await createTestContext(kind, {
      workers: true,
      config: { apnsProductionUrl: production.url, apnsSandboxUrl: sandbox.url, apnsCaFile: cert.certFile },
    });
    expect((await putApn()).statusCode).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await production?.close();
    await sandbox?.close();
    cert?.dispose();
  });
  beforeEach(() => {
    production.requests.length = 0;
    sandbox.requests.length = 0;
  });

  it('refuses an apns-collapse-id longer than APNs takes (64), at the send', async () => {
    const res = await send({ type: 'order_shipped', to: { id: 'ios-user', pushTokens: [apn(deviceToken())] }, mobile_push: { title: 't', message: 'm' }, options: { apn: { collapseId: 'c'.repeat(65) } } });
    expectErrorBody(res, 400, 'VALIDATION_FAILED', /collapseId/);
    expect(sandbox.requests).toHaveLength(0);
  });

  it('renders the push and sends it to every device of the user, each to its gateway', async () => {
    const phone = deviceToken();
    const tablet = deviceToken();
    const res = await send({
      type: 'order_shipped',
      to: { id: 'ios-user', pushTokens: [apn(phone, 'production'), apn(tablet, 'sandbox')] },
      parameters: { order: '42' },
      mobile_push: { title: 'Order {{ order }} shipped', message: 'Order #{{ order }} is on its way' },
      options: { apn: { badge: 1, sound: 'default', threadId: 'orders', collapseId: 'order-42', expiry: 600 }, push: { customData: { orderId: '42' } } },
    });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json();
    const record = await settled(trackingId, 'mobile_push_sent_at');
    expect(record).toMatchObject({ mobile_push_routing: 'SEND', mobile_push_preview: 'Order 42 shipped' });
    expect(record.mobile_push_sent_token.split(', ').sort()).toEqual([phone, tablet].sort());
    expect(record.mobile_push_sent_after).toBeGreaterThanOrEqual(0);
    expect(record.mobile_push_failed_token).toBeUndefined();

    expect(production.requests.map((r) => r.deviceToken)).toEqual([phone]);
    expect(sandbox.requests.map((r) => r.deviceToken)).toEqual([tablet]);
    for (const req of [...production.requests, ...sandbox.requests]) {
      expect(req.answer.status).toBe(200);
      expect(req.jwtClaims?.iss).toBe('TEAM123456');
      expect(req.headers['apns-topic']).toBe('com.example.app');
      expect(req.headers['apns-collapse-id']).toBe('order-42');
      expect(JSON.parse(req.rawPayload)).toEqual({
        aps: { alert: { title: 'Order 42 shipped', body: 'Order #42 is on its way' }, badge: 1, sound: 'default', 'thread-id': 'orders' },
        orderId: '42',
      });
    }
  });

  it('removes a token APNs calls BadDeviceToken and still delivers to the good one', async () => {
    const good = deviceToken();
    const bad = 'this-is-no-device-token';
    const fcm = { type: 'FCM', token: 'fcm-token-without-credentials', device: { device_id: 'pixel' } };
    const { trackingId } = (
      await send({ type: 'mixed', to: { id: 'mixed-user', pushTokens: [apn(good), apn(bad), fcm] }, mobile_push: { title: 'Hi', message: 'there' } })
    ).json();
    const record = await settled(trackingId, 'mobile_push_sent_at');
    expect(record.mobile_push_sent_token).toBe(good);
    expect(record.mobile_push_failed_token.split(', ')).toEqual([bad, fcm.token]);
    expect(record.mobile_push_failed_code.split(', ')).toEqual(['APNS_BAD_DEVICE_TOKEN', 'NOT_CONFIGURED']);
    expect(sandbox.requests.map((r) => r.answer.reason ?? r.answer.status).sort()).toEqual([200, 'BadDeviceToken'].sort());
    // No collapseId of its own: the trackingId, so that the push shows once if it goes out twice.
    expect(sandbox.requests.map((r) => r.headers['apns-collapse-id'])).toEqual([trackingId, trackingId]);

    // The invalid token is gone from the user; the FCM token (not configured, not invalid) stays.
    const stored = await user('mixed-user');
    expect(stored.pushTokens.map((p: { token: string }) => p.token)).toEqual([good, fcm.token]);
  });

  it("files a token under the environment whose gateway took it, so the next push goes there first", async () => {
    // A development build's token filed as production: the production gateway does not know it.
    const devBuild = deviceToken();
    production.script(devBuild, { status: 400, reason: 'BadDeviceToken' });
    const first = (await send({ type: 'dev-build', to: { id: 'dev-build-user', pushTokens: [apn(devBuild, 'production')] }, mobile_push: { title: 'Hi', message: 'one' } })).json();
    expect((await settled(first.trackingId, 'mobile_push_sent_at')).mobile_push_sent_token).toBe(devBuild);
    expect((await user('dev-build-user')).pushTokens).toEqual([apn(devBuild, 'sandbox')]);

    const second = (await send({ type: 'dev-build', to: { id: 'dev-build-user' }, mobile_push: { title: 'Hi', message: 'two' } })).json();
    await settled(second.trackingId, 'mobile_push_sent_at');
    // Production was asked once, by the first push; the second went to the sandbox alone.
    expect(production.requests.filter((r) => r.deviceToken === devBuild).map((r) => r.answer.status)).toEqual([400]);
    expect(sandbox.requests.filter((r) => r.deviceToken === devBuild).map((r) => r.answer.status)).toEqual([200, 200]);
  });

  it('fails the delivery when every token is invalid, and removes them all', async () => {
    const gone = deviceToken();
    sandbox.unregister(gone);
    const { trackingId } = (await send({ type: 'gone', to: { id: 'gone-user', pushTokens: [apn(gone), apn('bad-token')] }, mobile_push: { title: 'Hi', message: 'x' } })).json();
    const record = await settled(trackingId, 'mobile_push_failed_at');
    expect(record.mobile_push_failed_code).toMatch(/^APNS_(UNREGISTERED|BAD_DEVICE_TOKEN)$/);
    expect(record.mobile_push_sent_at).toBeUndefined();
    expect(sandbox.requests.map((r) => r.answer.status).sort()).toEqual([400, 410]);
    expect((await user('gone-user')).pushTokens).toBeUndefined();

    // The next send finds no device: routed away, nothing sent.
    const next = (await send({ type: 'gone', to: { id: 'gone-user' }, mobile_push: { title: 'Hi', message: 'x' } })).json();
    expect((await settled(next.trackingId, 'processed_at')).mobile_push_routing_reason).toBe('NO_PUSH_TOKENS');
  });

  it('retries when APNs is briefly unavailable', async () => {
    const token = deviceToken();
    sandbox.script(token, { status: 503, reason: 'ServiceUnavailable' }, { status: 429, reason: 'TooManyRequests' });
    const { trackingId } = (await send({ type: 'retry', to: { id: 'retry-user', pushTokens: [apn(token)] }, mobile_push: { title: 'Hi', message: 'x' } })).json();
    const record = await settled(trackingId, 'mobile_push_sent_at');
    expect(record.mobile_push_sent_token).toBe(token);
    expect(sandbox.requests.map((r) => r.answer.status)).toEqual([503, 429, 200]);
    const attempts = await t.deps.db.withTables<SendingTables>()
      .selectFrom('delivery_attempts')
      .innerJoin('deliveries', 'deliveries.id', 'delivery_attempts.delivery_id')
      .select(['delivery_attempts.outcome', 'delivery_attempts.provider_code'])
      .where('deliveries.tracking_id', '=', trackingId)
      .orderBy('delivery_attempts.attempt')
      .execute();
    expect(attempts).toEqual([
      { outcome: 'retry', provider_code: '503 ServiceUnavailable' },
      { outcome: 'retry', provider_code: '429 TooManyRequests' },
      { outcome: 'success', provider_code: null },
    ]);
    expect((await user('retry-user')).pushTokens).toHaveLength(1);
  });

  it('without APNs credentials the delivery fails NOT_CONFIGURED and keeps the token', async () => {
    expect((await t.app.inject({ method: 'DELETE', url: '/settings/push/apn', headers: t.auth })).statusCode).toBe(200);
    try {
      const token = deviceToken();
      const { trackingId } = (await send({ type: 'nocreds', to: { id: 'nocreds-user', pushTokens: [apn(token)] }, mobile_push: { title: 'Hi', message: 'x' } })).json();
      const record = await settled(trackingId, 'mobile_push_failed_at');
      expect(record.mobile_push_failed_code).toBe('NOT_CONFIGURED');
      expect(sandbox.requests).toHaveLength(0);
      expect((await user('nocreds-user')).pushTokens).toHaveLength(1);
    } finally {
      expect((await putApn()).statusCode).toBe(200);
    }
  });
});

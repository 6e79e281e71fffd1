import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type FcmPeer, generateServiceAccountKeys, startFcmPeer } from '../helpers/fcm-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const deviceToken = () => `fcm-${randomBytes(24).toString('base64url')}`;
const fcm = (token: string) => ({ type: 'FCM', token, device: { device_id: `dev-${token.slice(4, 10)}`, platform: 'android' } });

describe.each(STORAGE_KINDS)('send: mobile push over FCM HTTP v1 end to end (%s)', (kind) => {
  const keys = generateServiceAccountKeys();
  let peer: FcmPeer;
  let t: TestContext;
  // Held still: android.ttl counts from the send, so the first attempt carries the whole ttl only when no time passes.
  const clock = new ManualClock(new Date());
  const send = (payload: unknown) => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] ? log(trackingId) : undefined), 15_000, field);
  const user = async (id: string) => (await t.app.inject({ method: 'GET', url: `/users/${id}`, headers: t.auth })).json();

  beforeAll(async () => {
    peer = await startFcmPeer({ publicKey: keys.publicKey });
    t = await createTestContext(kind, { workers: true, clock, config: { allowPrivateNetworks: true, fcmBaseUrl: peer.url } });
    const res = await t.app.inject({ method: 'PUT', url: '/settings/push/fcm', headers: t.auth, payload: { fcmConfig: JSON.stringify(peer.serviceAccount(keys.privateKey)) } });
    expect(res.statusCode).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await peer?.close();
  });
  beforeEach(() => {
    peer.sends.length = 0;
  });

  it('renders the push, sends it to each FCM device with the options, and logs mobile_push_sent_*', async () => {
    const phone = deviceToken();
    const tablet = deviceToken();
    const res = await send({
      type: 'order_shipped',
      to: { id: 'android-user', pushTokens: [fcm(phone), fcm(tablet)] },
      parameters: { order: '42' },
      mobile_push: { title: 'Order {{ order }} shipped', message: 'Order #{{ order }} is on its way' },
      options: {
        fcm: { android: { collapseKey: 'order-42', priority: 'high', ttl: 600, restrictedPackageName: 'com.example.shop' } },
        push: { customData: { orderId: '42' } },
      },
    });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json();
    const record = await settled(trackingId, 'mobile_push_sent_at');
    expect(record).toMatchObject({ mobile_push_routing: 'SEND', mobile_push_preview: 'Order 42 shipped' });
    expect(record.mobile_push_sent_token.split(', ').sort()).toEqual([phone, tablet].sort());
    expect(record.mobile_push_sent_after).toBeGreaterThanOrEqual(0);
    expect(record.mobile_push_failed_token).toBeUndefined();

    expect(peer.sends.map((s) => s.body.message.token).sort()).toEqual([phone, tablet].sort());
    for (const s of peer.sends) {
      expect(s.status).toBe(200);
      expect(s.body).toEqual({
        message: {
          token: s.body.message.token,
          notification: { title: 'Order 42 shipped', body: 'Order #42 is on its way' },
          data: { orderId: '42' },
          // The trackingId as tag (and iOS collapse id): a push that goes out twice shows once.
          android: { collapse_key: 'order-42', priority: 'HIGH', ttl: '600s', restricted_package_name: 'com.example.shop', notification: { tag: trackingId } },
          apns: { headers: { 'apns-collapse-id': trackingId } },
        },
      });
    }
  });

  it('removes a token FCM calls UNREGISTERED and still delivers to the good one', async () => {
    const good = deviceToken();
    const gone = deviceToken();
    peer.fail(gone, 'UNREGISTERED');
    const { trackingId } = (await send({ type: 'fcm_cleanup', to: { id: 'android-two', pushTokens: [fcm(good), fcm(gone)] }, mobile_push: { title: 't', message: 'm' } })).json();
    const record = await settled(trackingId, 'mobile_push_sent_at');
    expect(record.mobile_push_sent_token).toBe(good);
    expect(record.mobile_push_failed_token).toBe(gone);
    expect(record.mobile_push_failed_code).toBe('FCM_UNREGISTERED');
    const tokens = await eventually(async () => {
      const u = await user('android-two');
      return u.pushTokens?.length === 1 ? u.pushTokens : undefined;
    });
    expect(tokens.map((p: { token: string }) => p.token)).toEqual([good]);
  });

  it('fails the delivery with UNREGISTERED when the only device is gone, and removes its token', async () => {
    const gone = deviceToken();
    peer.fail(gone, 'UNREGISTERED');
    const { trackingId } = (await send({ type: 'fcm_gone', to: { id: 'android-gone', pushTokens: [fcm(gone)] }, mobile_push: { title: 't', message: 'm' } })).json();
    const record = await settled(trackingId, 'mobile_push_failed_at');
    expect(record.mobile_push_failed_code).toBe('FCM_UNREGISTERED');
    expect(record.mobile_push_sent_at).toBeUndefined();
    expect((await user('android-gone')).pushTokens ?? []).toEqual([]);
  });

  it('retries a 429 QUOTA_EXCEEDED after Retry-After and then delivers', async () => {
    const busy = deviceToken();
    peer.fail(busy, 'QUOTA_EXCEEDED', { retryAfter: '0', times: 1 });
    const { trackingId } = (await send({ type: 'fcm_quota', to: { id: 'android-busy', pushTokens: [fcm(busy)] }, mobile_push: { title: 't', message: 'm' } })).json();
    const record = await settled(trackingId, 'mobile_push_sent_at');
    expect(record.mobile_push_sent_token).toBe(busy);
    expect(peer.sends.filter((s) => s.body.message.token === busy).map((s) => s.status)).toEqual([429, 200]);
    expect((await user('android-busy')).pushTokens.map((p: { token: string }) => p.token)).toEqual([busy]);
  });

  it('fails with NOT_CONFIGURED when the environment has no FCM credentials', async () => {
    const other = await t.newAccount('No FCM');
    const res = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: { authorization: `Bearer ${other.apiKey}` },
      payload: { type: 'fcm_unconfigured', to: { id: 'u', pushTokens: [fcm(deviceToken())] }, mobile_push: { title: 't', message: 'm' } },
    });
    const { trackingId } = res.json();
    const record = await eventually(async () => {
      const r = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: { authorization: `Bearer ${other.apiKey}` } })).json().logs[0];
      return r?.mobile_push_failed_at ? r : undefined;
    }, 15_000);
    expect(record.mobile_push_failed_code).toBe('NOT_CONFIGURED');
    expect(peer.sends).toHaveLength(0);
  });
});

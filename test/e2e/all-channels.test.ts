import { randomBytes } from 'node:crypto';
import { exportPKCS8, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApnsPeer, type TestCertificate, createTestCertificate, startApnsPeer } from '../helpers/apns-peer.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import type { InappTables } from '../../src/modules/inapp/inapp.repository.js';
import { type FcmPeer, generateServiceAccountKeys, startFcmPeer } from '../helpers/fcm-peer.js';
import { type PushEndpoint, startPushEndpoint } from '../helpers/push-endpoint.js';
import { type SlackPeer, startSlackPeer } from '../helpers/slack-peer.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/**
 * One send with content for every channel to one user who has every kind of contact data:
 * each protocol peer receives exactly what the user should see, and the log shows every delivery.
 */
describe.each(STORAGE_KINDS)('one notification on every channel (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let slack: SlackPeer;
  let push: PushEndpoint;
  let fcm: FcmPeer;
  let apns: ApnsPeer;
  let cert: TestCertificate;
  const fcmKeys = generateServiceAccountKeys();
  const apnToken = randomBytes(32).toString('hex');
  const fcmToken = `fcm-${randomBytes(24).toString('base64url')}`;

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    slack = await startSlackPeer({ tokens: ['xoxb-acme'], channels: [{ id: 'C0OPS', name: 'ops' }] });
    push = await startPushEndpoint();
    fcm = await startFcmPeer({ publicKey: fcmKeys.publicKey });
    cert = createTestCertificate();
    const apnKeys = await generateKeyPair('ES256', { extractable: true });
    const apnConfig = { KeyId: 'KEY1234567', Key: await exportPKCS8(apnKeys.privateKey), TeamId: 'TEAM765432', Topic: 'com.example.ops' };
    apns = await startApnsPeer({ certificate: cert, publicKey: apnKeys.publicKey, keyId: apnConfig.KeyId, teamId: apnConfig.TeamId, topic: apnConfig.Topic });
    t = await createTestContext(kind, {
      workers: true,
      config: {
        smtpUrl: smtp.url,
        allowPrivateNetworks: true,
        slackApiUrl: slack.url,
        fcmBaseUrl: fcm.url,
        apnsProductionUrl: apns.url,
        apnsSandboxUrl: apns.url,
        apnsCaFile: cert.certFile,
      },
    });
    // The built-in carrier calls Clarion back over real HTTP.
    t.deps.config.publicUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const put = (url: string, payload: object) => t.app.inject({ method: 'PUT', url, headers: t.auth, payload });
    expect((await put('/settings/push/apn', apnConfig)).statusCode).toBe(200);
    expect((await put('/settings/push/fcm', { fcmConfig: JSON.stringify(fcm.serviceAccount(fcmKeys.privateKey)) })).statusCode).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await Promise.all([smtp?.close(), slack?.close(), push?.close(), fcm?.close(), apns?.close()]);
    cert?.dispose();
  });

  it('reaches every peer with the rendered content and logs each channel', async () => {
    const browser = push.subscribe();
    const res = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: t.auth,
      payload: {
        type: 'incident',
        to: {
          id: 'oncall',
          email: 'oncall@example.com',
          number: '+14155550188',
          pushTokens: [
            { type: 'APN', token: apnToken, device: { device_id: 'iphone' }, environment: 'production' },
            { type: 'FCM', token: fcmToken, device: { device_id: 'pixel' } },
          ],
          webPushTokens: [{ sub: browser.sub }],
          slackChannel: '#ops',
          slackToken: { ok: true, access_token: 'xoxb-acme' },
        },
        parameters: { service: 'db-1' },
        email: { subject: '{{ service }} is down', html: '<p>{{ service }} is down</p>' },
        inapp: { title: '{{ service }} is down', url: 'https://status.example.com' },
        sms: { message: '{{ service }} is down' },
        call: { message: 'Service {{ service }} is down' },
        web_push: { title: '{{ service }} is down', message: 'Open the status page', url: 'https://status.example.com' },
        mobile_push: { title: '{{ service }} is down', message: 'Tap to acknowledge' },
        slack: { text: ':red_circle: {{ service }} is down' },
      },
    });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json();
    const log = async () => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
    const done = ['email_sent_at', 'inapp_delivered_at', 'sms_delivered_at', 'call_delivered_at', 'web_push_sent_at', 'mobile_push_sent_at', 'slack_delivered_at'];
    // Gives up before the test's own timeout, so that a failure names the channels still missing
    // and what the log says about them.
    const record = await eventually(async () => {
      const r = await log();
      const missing = done.filter((f) => !r?.[f]);
      if (missing.length > 0) throw new Error(`missing ${missing.join(', ')} in ${JSON.stringify(r)}`);
      return r;
    }, 40_000, 'every channel delivered');

    for (const channel of ['email', 'inapp', 'sms', 'call', 'web_push', 'mobile_push', 'slack']) {
      expect(record[`${channel}_routing`], channel).toBe('SEND');
      expect(record[`${channel}_failed_at`], channel).toBeUndefined();
    }

    const [mail] = await smtp.waitFor(1);
    expect(mail.parsed.subject).toBe('db-1 is down');
    expect(mail.envelope.to).toEqual(['oncall@example.com']);

    const inapp = await t.deps.db.withTables<InappTables>().selectFrom('inapp_notifications').selectAll().execute();
    expect(inapp.map((n) => [n.user_id, n.title])).toEqual([['oncall', 'db-1 is down']]);

    const carrier = async (what: 'messages' | 'calls') => (await t.app.inject({ method: 'GET', url: `/dev-carrier/${what}`, headers: t.auth })).json()[what];
    expect((await carrier('messages')).map((m: { to: string; body: string }) => [m.to, m.body])).toEqual([['+14155550188', 'db-1 is down']]);
    expect((await carrier('calls')).map((c: { to: string; spokenText: string }) => [c.to, c.spokenText])).toEqual([['+14155550188', 'Service db-1 is down']]);

    const [webPush] = await push.waitFor(1);
    expect(webPush.json()).toEqual({ title: 'db-1 is down', message: 'Open the status page', url: 'https://status.example.com' });

    expect(apns.requests.map((r) => [r.deviceToken, JSON.parse(r.rawPayload).aps.alert])).toEqual([[apnToken, { title: 'db-1 is down', body: 'Tap to acknowledge' }]]);
    expect(fcm.sends.map((s) => [s.body.message.token, s.body.message.notification])).toEqual([[fcmToken, { title: 'db-1 is down', body: 'Tap to acknowledge' }]]);

    const posts = await slack.waitForPosts(1);
    expect(posts.map((p) => [p.channel, p.args.text, p.token])).toEqual([['C0OPS', ':red_circle: db-1 is down', 'xoxb-acme']]);
  }, 60_000);
});

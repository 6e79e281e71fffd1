// Preferences through the published clients against the listening server, on both engines:
// - the in-app client @notificationapi/core: getPreferences and updateDeliveryOption (JSON posted
//   as text/plain, Basic clientId:userId[:userHash], secure mode), refusals visible in the log;
// - the older server SDK notificationapi-node-server-sdk (the real package, init with baseURL):
//   setUserPreferences is POST /{clientId}/user_preferences/{userId} with Basic
//   clientId:clientSecret and an array body, deleteUserPreferences
//   DELETE /{clientId}/users/{userId}/preferences?notificationId=&subNotificationId= with the
//   user's Basic clientId:userId:hash.
import { Writable } from 'node:stream';
import { NotificationAPIClientSDK } from '@notificationapi/core';
import notificationapi from 'notificationapi-node-server-sdk';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { type ClientCall, routeClientFetch } from '../helpers/client-fetch.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const sent: ClientCall[] = [];

interface Preferences {
  preferences: { notificationId: string; channel: string; delivery: string; subNotificationId?: string }[];
  notifications: { notificationId: string; title: string; channels: string[]; options: Record<string, { defaultDeliveryOption: string }> }[];
  subNotifications: unknown[];
}

describe.each(STORAGE_KINDS)('preferences through the published clients (%s)', (kind) => {
  let t: TestContext;
  let host = '';
  let realFetch: typeof fetch;
  let restoreFetch: () => void;
  const logLines: Record<string, unknown>[] = [];
  const basic = (text: string) => ({ authorization: `Basic ${Buffer.from(text).toString('base64')}` });

  beforeAll(async () => {
    const logStream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) logLines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    t = await createTestContext(kind, { logger: pino({ level: 'warn' }, logStream) });
    ({ host, realFetch, restore: restoreFetch } = await routeClientFetch(t.app, sent));
    const type = await t.app.inject({
      method: 'POST',
      url: '/types',
      headers: t.auth,
      payload: { notificationId: 'comments', title: 'New comments', channels: ['EMAIL', 'INAPP_WEB'], options: { EMAIL: { defaultDeliveryOption: 'instant', off: { enabled: true } } } },
    });
    expect(type.statusCode).toBe(200);
  });
  afterAll(async () => {
    restoreFetch();
    await t.close();
  });

  it('getPreferences and updateDeliveryOption of @notificationapi/core', async () => {
    const client = NotificationAPIClientSDK.init({ clientId: t.account.clientId, userId: 'ada@example.com', host });
    const before = (await client.getPreferences()) as unknown as Preferences;
    expect(before.preferences).toEqual([]);
    expect(before.subNotifications).toEqual([]);
    expect(before.notifications).toEqual([
      expect.objectContaining({ notificationId: 'comments', title: 'New comments', channels: ['EMAIL', 'INAPP_WEB'], options: expect.objectContaining({ EMAIL: { defaultDeliveryOption: 'instant', off: { enabled: true } } }) as unknown }),
    ]);

    sent.length = 0;
    await client.updateDeliveryOption({ notificationId: 'comments', channel: 'EMAIL', delivery: 'off' });
    await client.updateDeliveryOption({ notificationId: 'comments', subNotificationId: 'post-9', channel: 'INAPP_WEB', delivery: 'off' });
    // Exactly what the client sent: an array, through fetch with a string body (no Content-Type: text/plain on the wire).
    expect(sent[0]).toMatchObject({ method: 'POST', url: `https://${host}/${t.account.clientId}/users/${encodeURIComponent('ada@example.com')}/preferences` });
    expect(sent[0].headers['Content-Type']).toBeUndefined();
    expect(JSON.parse(sent[0].body!)).toEqual([{ notificationId: 'comments', channel: 'EMAIL', delivery: 'off' }]);

    const after = (await client.getPreferences()) as unknown as Preferences;
    expect(after.preferences).toEqual([
      { notificationId: 'comments', channel: 'EMAIL', delivery: 'off' },
      { notificationId: 'comments', channel: 'INAPP_WEB', delivery: 'off', subNotificationId: 'post-9' },
    ]);
  });

  it('a refused update changes nothing and says why in the log (the client never reads the status)', async () => {
    const client = NotificationAPIClientSDK.init({ clientId: t.account.clientId, userId: 'bob', host });
    logLines.length = 0;
    await client.updateDeliveryOption({ notificationId: 'comments', channel: 'EMAIL', delivery: 'daily' });
    await client.updateDeliveryOption({ notificationId: 'gone', channel: 'EMAIL', delivery: 'off' });
    expect(((await client.getPreferences()) as unknown as Preferences).preferences).toEqual([]);
    const refusals = logLines.filter((l) => l.msg === 'in-app client preferences request refused');
    expect(refusals).toEqual([
      expect.objectContaining({ level: 40, clientId: t.account.clientId, userId: 'bob', code: 'VALIDATION_FAILED', reason: expect.stringContaining('"daily" is not an option users may pick for EMAIL') as unknown }),
      expect.objectContaining({ code: 'NOT_FOUND', reason: expect.stringContaining('"gone"') as unknown }),
    ]);
  });

  it('secure mode: the user hash is required, and another user cannot act', async () => {
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Secure' } })).json<{ clientId: string; clientSecret: string }>();
    await t.app.inject({ method: 'PATCH', url: `/environments/${env.clientId}`, headers: t.auth, payload: { secureMode: true } });
    await t.app.inject({ method: 'POST', url: `/types?envId=${env.clientId}`, headers: t.auth, payload: { notificationId: 'comments', title: 'New comments', channels: ['EMAIL'] } });

    const hashed = NotificationAPIClientSDK.init({ clientId: env.clientId, userId: 'cy', hashedUserId: userHash(env.clientSecret, 'cy'), host });
    await hashed.updateDeliveryOption({ notificationId: 'comments', channel: 'EMAIL', delivery: 'off' });
    expect(((await hashed.getPreferences()) as unknown as Preferences).preferences).toEqual([{ notificationId: 'comments', channel: 'EMAIL', delivery: 'off' }]);

    const unhashed = NotificationAPIClientSDK.init({ clientId: env.clientId, userId: 'cy', host });
    const refused = (await unhashed.getPreferences()) as unknown as { error: { code: string } };
    expect(refused.error.code).toBe('UNAUTHORIZED');
    // Someone else's hash does not open cy's preferences.
    const path = `/${env.clientId}/users/cy/preferences`;
    const wrongUser = await t.app.inject({ method: 'GET', url: path, headers: basic(`${env.clientId}:dan:${userHash(env.clientSecret, 'dan')}`) });
    expect(wrongUser.statusCode).toBe(401);
  });

  it("the older server SDK's setUserPreferences and deleteUserPreferences", async () => {
    notificationapi.init(t.account.clientId, t.account.clientSecret, { baseURL: `http://${host}` });
    const set = await notificationapi.setUserPreferences('dee', [
      { notificationId: 'comments', channel: 'EMAIL', delivery: 'off' },
      { notificationId: 'comments', channel: 'INAPP_WEB', delivery: 'off', subNotificationId: 'post-1' },
      { notificationId: 'comments', channel: 'INAPP_WEB', delivery: 'off', subNotificationId: 'post-2' },
    ]);
    expect(set.status).toBe(200);
    const prefs = async () => (await t.app.inject({ method: 'GET', url: '/users/dee/preferences', headers: t.auth })).json<Preferences>().preferences;
    expect(await prefs()).toHaveLength(3);

    // One sub-notification's, then the type's: the SDK sends the user's Basic clientId:userId:hash.
    expect((await notificationapi.deleteUserPreferences('dee', 'comments', 'post-1')).data).toEqual({ success: true, deleted: 1 });
    expect((await notificationapi.deleteUserPreferences('dee', 'comments')).data).toEqual({ success: true, deleted: 2 });
    expect(await prefs()).toEqual([]);
    // The same path with the server's own credentials works too.
    const server = basic(`${t.account.clientId}:${t.account.clientSecret}`);
    await notificationapi.setUserPreferences('dee', [{ notificationId: 'comments', channel: 'EMAIL', delivery: 'off' }]);
    const byServer = await realFetch(`http://${host}/${t.account.clientId}/users/dee/preferences`, { method: 'DELETE', headers: server });
    expect(await byServer.json()).toEqual({ success: true, deleted: 1 });
    // A wrong secret is neither the server nor the user.
    const wrong = await realFetch(`http://${host}/${t.account.clientId}/users/dee/preferences`, { method: 'DELETE', headers: basic(`${t.account.clientId}:not-the-secret`) });
    expect(wrong.status).toBe(401);
  });
});

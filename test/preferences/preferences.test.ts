// User preferences on both engines: precedence (sub-notification over type over the type's
// default) read the way routing reads it, the service's rules (existing type, supported and
// allowed options, all or nothing), resets, and isolation across accounts and environments.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { PreferenceBook } from '../../src/modules/preferences/preferences.service.js';
import type { NotificationType } from '../../src/modules/types/types.service.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('user preferences: precedence and rules (%s)', (kind) => {
  let t: TestContext;
  let scope: { accountId: string; envId: string };
  let news: NotificationType;
  const req = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const book = () => PreferenceBook.read(t.deps.db, scope, ['ada', 'bob'], ['news']);

  beforeAll(async () => {
    t = await createTestContext(kind);
    scope = { accountId: t.account.accountId, envId: t.account.clientId };
    const created = await req('POST', '/types', {
      notificationId: 'news',
      title: 'News',
      channels: ['EMAIL', 'SMS', 'INAPP_WEB'],
      options: { EMAIL: { defaultDeliveryOption: 'off' }, SMS: { defaultDeliveryOption: 'instant', off: { enabled: false } } },
    });
    expect(created.statusCode).toBe(200);
    news = created.json();
    await req('POST', '/types', { notificationId: 'other', title: 'Other', channels: ['EMAIL'] });
  });
  afterAll(() => t.close());

  it('resolves sub-notification over type over the type default over instant, and resets back down', async () => {
    // Nothing chosen: the type's defaults (EMAIL off, SMS instant) and instant elsewhere.
    let b = await book();
    expect(b.resolve('ada', news, null, 'EMAIL')).toEqual({ delivery: 'off', explicit: false });
    expect(b.resolve('ada', news, null, 'SMS')).toEqual({ delivery: 'instant', explicit: false });
    expect(b.resolve('ada', news, null, 'INAPP_WEB')).toEqual({ delivery: 'instant', explicit: false });

    await t.services.preferences.set(scope, 'ada', [{ notificationId: 'news', channel: 'EMAIL', delivery: 'instant' }], 'api');
    await t.services.preferences.set(scope, 'ada', [{ notificationId: 'news', subNotificationId: 'group-a', channel: 'EMAIL', delivery: 'off' }], 'user');
    b = await book();
    expect(b.resolve('ada', news, null, 'EMAIL')).toEqual({ delivery: 'instant', explicit: true });
    expect(b.resolve('ada', news, 'group-a', 'EMAIL')).toEqual({ delivery: 'off', explicit: true });
    // A sub-notification without its own option follows the type's.
    expect(b.resolve('ada', news, 'group-b', 'EMAIL')).toEqual({ delivery: 'instant', explicit: true });
    // Another user is untouched.
    expect(b.resolve('bob', news, 'group-a', 'EMAIL')).toEqual({ delivery: 'off', explicit: false });
    expect(b.channelsOff('ada', news, 'group-a')).toEqual({ byUser: new Set(['email']), byDefault: new Set() });
    expect(b.channelsOff('bob', news, null)).toEqual({ byUser: new Set(), byDefault: new Set(['email']) });

    // Resetting the sub-notification falls back to the type's option, resetting the type to its default.
    expect((await req('DELETE', '/users/ada/preferences?notificationId=news&subNotificationId=group-a')).json()).toEqual({ success: true, deleted: 1 });
    expect((await book()).resolve('ada', news, 'group-a', 'EMAIL')).toEqual({ delivery: 'instant', explicit: true });
    expect((await req('DELETE', '/users/ada/preferences?notificationId=news')).json()).toEqual({ success: true, deleted: 1 });
    expect((await book()).resolve('ada', news, 'group-a', 'EMAIL')).toEqual({ delivery: 'off', explicit: false });
  });

  it('sets every channel of the type when the channel is omitted, and answers the GetPreferencesResponse shape', async () => {
    expect((await req('POST', '/user_preferences/cy', [{ notificationId: 'other', delivery: 'off' }])).statusCode).toBe(200);
    const got = (await req('GET', '/users/cy/preferences')).json();
    expect(got.preferences).toEqual([{ notificationId: 'other', channel: 'EMAIL', delivery: 'off' }]);
    expect(got.subNotifications).toEqual([]);
    const listed = got.notifications.find((n: { notificationId: string }) => n.notificationId === 'news');
    expect(listed).toEqual({
      notificationId: 'news',
      title: 'News',
      channels: ['EMAIL', 'SMS', 'INAPP_WEB'],
      // As configured, and the defaults for a channel without options.
      options: {
        EMAIL: { defaultDeliveryOption: 'off' },
        SMS: { defaultDeliveryOption: 'instant', off: { enabled: false } },
        INAPP_WEB: { defaultDeliveryOption: 'instant', off: { enabled: true }, instant: { enabled: true } },
      },
    });
  });

  it('refuses an unknown type, a digest the type does not offer, an option the type disallows and a malformed item, all or nothing', async () => {
    const cases: [unknown, number, string][] = [
      [[{ notificationId: 'nope', channel: 'EMAIL', delivery: 'off' }], 404, 'nope'],
      [[{ notificationId: 'news', channel: 'EMAIL', delivery: 'daily' }], 400, '[0].delivery: "daily" is not an option users may pick for EMAIL'],
      [[{ notificationId: 'news', channel: 'INAPP_WEB', delivery: 'hourly' }], 400, 'in-app has no digests'],
      [[{ notificationId: 'news', channel: 'SMS', delivery: 'off' }], 400, 'options.SMS.off.enabled is false'],
      [[{ notificationId: 'news', channel: 'EMAIL' }], 400, '[0].delivery is required'],
      [[{ notificationId: 'news', channel: 'FAX', delivery: 'off' }], 400, 'channel'],
      [[{ notificationId: 'news', channel: 'EMAIL', delivery: 'sometimes' }], 400, 'delivery'],
      [[{ notificationId: 'news', channel: 'EMAIL', delivery: 'off', extra: 1 }], 400, '"extra" is not allowed'],
      [[], 400, 'fewer than 1'],
      // The first item is valid: nothing of the batch is stored.
      [[{ notificationId: 'news', channel: 'EMAIL', delivery: 'off' }, { notificationId: 'news', channel: 'EMAIL', delivery: 'weekly' }], 400, '[1].delivery'],
    ];
    for (const [body, status, named] of cases) {
      const res = await req('POST', '/user_preferences/dee', body);
      expect(res.statusCode, res.body).toBe(status);
      expect(res.json().error.message).toContain(named);
    }
    expect((await req('GET', '/users/dee/preferences')).json().preferences).toEqual([]);
    // subNotificationId alone names no type.
    expect((await req('DELETE', '/users/dee/preferences?subNotificationId=x')).statusCode).toBe(400);
  });

  it("resets with the environment's public key acting for the user, with the user's hash in secure mode", async () => {
    const publicKey = (await req('POST', '/keys', { name: 'web page', keyType: 'public' })).json<{ key: string }>().key;
    const asPage = { authorization: `Bearer ${publicKey}` };
    const reset = (query = '') => req('DELETE', `/${t.account.clientId}/users/eve/preferences${query}`, undefined, asPage);
    await t.services.preferences.set(scope, 'eve', [{ notificationId: 'news', channel: 'EMAIL', delivery: 'instant' }], 'user');
    expect((await reset()).json()).toEqual({ success: true, deleted: 1 });

    expect((await req('PATCH', `/environments/${t.account.clientId}`, { secureMode: true })).statusCode).toBe(200);
    await t.services.preferences.set(scope, 'eve', [{ notificationId: 'news', channel: 'EMAIL', delivery: 'instant' }], 'user');
    const refused = await reset();
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.message).toMatch(/secure mode/);
    expect((await reset('?userIdHash=wrong')).statusCode).toBe(401);
    const hash = userHash(t.account.clientSecret, 'eve');
    expect((await reset(`?userIdHash=${encodeURIComponent(hash)}`)).json()).toEqual({ success: true, deleted: 1 });
    expect((await req('PATCH', `/environments/${t.account.clientId}`, { secureMode: false })).statusCode).toBe(200);
  });

  it('keeps accounts and environments apart', async () => {
    await t.services.preferences.set(scope, 'iso', [{ notificationId: 'news', channel: 'EMAIL', delivery: 'instant' }], 'api');
    // Another account: same user id and type id, its own environment.
    const other = await t.newAccount();
    const theirs = { authorization: `Bearer ${other.apiKey}` };
    await req('POST', '/types', { notificationId: 'news', title: 'Theirs', channels: ['EMAIL'] }, theirs);
    expect((await req('GET', '/users/iso/preferences', undefined, theirs)).json().preferences).toEqual([]);
    expect((await req('DELETE', '/users/iso/preferences', undefined, theirs)).json()).toEqual({ success: true, deleted: 0 });
    // The older SDK's path names the environment: another environment's credentials cannot act in it.
    const basic = (id: string, secret: string) => ({ authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}` });
    const forged = await req('POST', `/${t.account.clientId}/user_preferences/iso`, [{ notificationId: 'news', channel: 'EMAIL', delivery: 'off' }], basic(other.clientId, other.clientSecret));
    expect(forged.statusCode).toBe(403);
    expect((await req('GET', '/users/iso/preferences')).json().preferences).toEqual([{ notificationId: 'news', channel: 'EMAIL', delivery: 'instant' }]);
    // A second environment of the same account sees nothing of the first.
    const env = await req('POST', '/environments', { title: 'Staging' });
    expect(env.statusCode, env.body).toBe(200);
    const staging = { accountId: t.account.accountId, envId: env.json().clientId as string };
    expect((await req('GET', `/users/iso/preferences?envId=${staging.envId}`)).json().preferences).toEqual([]);
    const stagingBook = await PreferenceBook.read(t.deps.db, staging, ['iso'], ['news']);
    expect(stagingBook.resolve('iso', news, null, 'EMAIL')).toEqual({ delivery: 'off', explicit: false });
    expect((await PreferenceBook.read(t.deps.db, scope, ['iso'], ['news'])).resolve('iso', news, null, 'EMAIL')).toEqual({ delivery: 'instant', explicit: true });
  });
});

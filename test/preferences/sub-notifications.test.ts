// Sub-notifications over HTTP on both engines: PUT creates or renames one (older server SDK path
// with Basic clientId:clientSecret, and the API-key twin), GetPreferencesResponse lists them, a
// DELETE removes one with every user's options for it, bad input gets the Error body, and a type
// deleted takes its sub-notifications along. Everything is scoped to its environment.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

interface Preferences {
  preferences: { notificationId: string; channel: string; delivery: string; subNotificationId?: string }[];
  subNotifications: { notificationId: string; subNotificationId: string; title: string }[];
}

describe.each(STORAGE_KINDS)('sub-notifications (%s)', (kind) => {
  let t: TestContext;
  let server: { authorization: string };
  const req = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown, headers = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const prefs = async (user: string, headers = t.auth) => (await req('GET', `/users/${user}/preferences`, undefined, headers)).json<Preferences>();

  beforeAll(async () => {
    t = await createTestContext(kind);
    server = { authorization: `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}`).toString('base64')}` };
    for (const id of ['comments', 'billing']) {
      expect((await req('POST', '/types', { notificationId: id, title: id, channels: ['EMAIL', 'INAPP_WEB'] })).statusCode).toBe(200);
    }
  });
  afterAll(() => t.close());

  it('creates and renames with the older SDK path and the API-key twin; GetPreferencesResponse lists them', async () => {
    const created = await req('PUT', `/${t.account.clientId}/notifications/comments/subNotifications/post-9`, { title: 'Post 9' }, server);
    expect(created.statusCode, created.body).toBe(200);
    expect(created.json()).toEqual({ notificationId: 'comments', subNotificationId: 'post-9', title: 'Post 9' });
    expect((await req('PUT', '/notifications/comments/subNotifications/post-1', { title: 'Post 1' })).statusCode).toBe(200);
    expect((await req('PUT', '/notifications/billing/subNotifications/invoices', { title: 'Invoices' })).statusCode).toBe(200);
    // PUT again renames it.
    expect((await req('PUT', `/${t.account.clientId}/notifications/comments/subNotifications/post-9`, { title: 'Post nine' }, server)).json().title).toBe('Post nine');

    expect((await prefs('ada')).subNotifications).toEqual([
      { notificationId: 'billing', subNotificationId: 'invoices', title: 'Invoices' },
      { notificationId: 'comments', subNotificationId: 'post-1', title: 'Post 1' },
      { notificationId: 'comments', subNotificationId: 'post-9', title: 'Post nine' },
    ]);
  });

  it("deletes one with every user's options for it, and leaves the rest", async () => {
    await req('PUT', '/notifications/comments/subNotifications/thread-4', { title: 'Thread 4' });
    for (const user of ['bob', 'cy']) {
      const set = await req('POST', `/user_preferences/${user}`, [
        { notificationId: 'comments', channel: 'EMAIL', delivery: 'off' },
        { notificationId: 'comments', subNotificationId: 'thread-4', channel: 'EMAIL', delivery: 'instant' },
        { notificationId: 'comments', subNotificationId: 'post-1', channel: 'INAPP_WEB', delivery: 'off' },
      ]);
      expect(set.statusCode, set.body).toBe(200);
    }
    const deleted = await req('DELETE', `/${t.account.clientId}/notifications/comments/subNotifications/thread-4`, undefined, server);
    expect(deleted.statusCode, deleted.body).toBe(200);
    expect(deleted.json()).toEqual({ success: true, deletedPreferences: 2 });
    for (const user of ['bob', 'cy']) {
      expect((await prefs(user)).preferences).toEqual([
        { notificationId: 'comments', channel: 'EMAIL', delivery: 'off' },
        { notificationId: 'comments', channel: 'INAPP_WEB', delivery: 'off', subNotificationId: 'post-1' },
      ]);
    }
    expect((await prefs('bob')).subNotifications.map((s) => s.subNotificationId)).not.toContain('thread-4');
    // Gone: a second DELETE is a 404.
    expectErrorBody(await req('DELETE', '/notifications/comments/subNotifications/thread-4'), 404, 'NOT_FOUND', /comments\/thread-4/);
  });

  it('refuses bad input with the Error body and writes nothing', async () => {
    expectErrorBody(await req('PUT', '/notifications/nope/subNotifications/x', { title: 'X' }), 404, 'NOT_FOUND', /"nope"/);
    expectErrorBody(await req('PUT', '/notifications/comments/subNotifications/x', {}), 400, 'VALIDATION_FAILED', /title/);
    expectErrorBody(await req('PUT', '/notifications/comments/subNotifications/x', { title: '' }), 400, 'VALIDATION_FAILED', /title/);
    expectErrorBody(await req('PUT', '/notifications/comments/subNotifications/x', { title: 'X', extra: 1 }), 400, 'VALIDATION_FAILED', /extra/);
    expectErrorBody(await req('PUT', `/notifications/comments/subNotifications/${'s'.repeat(201)}`, { title: 'X' }), 400, 'VALIDATION_FAILED', /subNotificationId/);
    expectErrorBody(await req('PUT', `/${t.account.clientId}/notifications/comments/subNotifications/x`, { title: 'X' }, { authorization: 'Basic bm9wZTpub3Bl' }), 401, 'UNAUTHORIZED', /./);
    expect((await prefs('ada')).subNotifications.map((s) => s.subNotificationId)).not.toContain('x');
  });

  it('keeps environments apart, and a deleted type takes its sub-notifications along', async () => {
    const other = await t.newAccount();
    const otherAuth = { authorization: `Bearer ${other.apiKey}` };
    expect((await req('POST', '/types', { notificationId: 'comments', title: 'c', channels: ['EMAIL'] }, otherAuth)).statusCode).toBe(200);
    expect((await prefs('ada', otherAuth)).subNotifications).toEqual([]);
    // Another account's credentials cannot delete this environment's sub-notification.
    expectErrorBody(await req('DELETE', '/notifications/comments/subNotifications/post-1', undefined, otherAuth), 404, 'NOT_FOUND', /post-1/);
    expect((await prefs('ada')).subNotifications.map((s) => s.subNotificationId)).toContain('post-1');

    expect((await req('DELETE', '/types/billing')).statusCode).toBe(200);
    expect((await prefs('ada')).subNotifications.map((s) => s.notificationId)).not.toContain('billing');
    // Recreated, the type starts without them.
    await req('POST', '/types', { notificationId: 'billing', title: 'billing', channels: ['EMAIL'] });
    expect((await prefs('ada')).subNotifications.map((s) => s.notificationId)).not.toContain('billing');
  });
});

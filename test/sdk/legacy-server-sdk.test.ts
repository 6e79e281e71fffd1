// The older server SDK notificationapi-node-server-sdk 2.8.0, the real package, pointed at the
// listening server with init's `baseURL`, on both engines with the delivery workers. Every method
// it has is called once at least, and its effect is read back through the API:
// init, send, retract, identifyUser, setUserPreferences, deleteUserPreferences, updateSchedule,
// deleteSchedule, queryLogs, updateInAppNotification, createSubNotification, deleteSubNotification.
// (Its `request` is the generic transport those methods share, not a call of its own.)
import type { AxiosError, AxiosResponse } from 'axios';
import notificationapi, { Channels } from 'notificationapi-node-server-sdk';
import { type MockInstance, afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

type Log = Record<string, unknown>;
interface Preferences {
  preferences: { notificationId: string; channel: string; delivery: string; subNotificationId?: string }[];
  subNotifications: { notificationId: string; subNotificationId: string; title: string }[];
}

describe.each(STORAGE_KINDS)('older server SDK notificationapi-node-server-sdk (%s)', (kind) => {
  let t: TestContext;
  let baseURL = '';
  // The SDK reports every 202 with console.log('NotificationAPI warning.', data) and every
  // failure with console.error: both are watched (and kept out of the test output).
  let consoleLog: MockInstance<typeof console.log>;
  let consoleError: MockInstance<typeof console.error>;
  const warnings = () => consoleLog.mock.calls.filter((c) => c[0] === 'NotificationAPI warning.');

  const api = async <T>(method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown): Promise<T> => {
    const res = await t.app.inject({ method, url, headers: t.auth, ...(payload ? { payload } : {}) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<T>();
  };
  const logOf = async (trackingId: string): Promise<Log | undefined> => (await api<{ logs: Log[] }>('GET', `/logs/${trackingId}`)).logs[0];
  /** The log once routing and the in-app and email deliveries (when routed) are done. */
  const processed = (trackingId: string) =>
    eventually(async () => {
      const log = await logOf(trackingId);
      const inappDone = log?.inapp_routing !== 'SEND' || log.inapp_delivered_at;
      const emailDone = log?.email_routing !== 'SEND' || log.email_sent_at || log.email_failed_at;
      return log?.processed_at && inappDone && emailDone ? log : undefined;
    }, 15_000, `processing of ${trackingId}`);
  const refusal = async (call: Promise<unknown>): Promise<{ status?: number; code?: string }> => {
    const err = (await call.then(() => expect.fail('the call was expected to fail'), (e: unknown) => e)) as AxiosError<{ error?: { code: string } }>;
    return { status: err.response?.status, code: err.response?.data?.error?.code };
  };

  beforeAll(async () => {
    consoleLog = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    consoleError = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    t = await createTestContext(kind, { workers: true });
    baseURL = await t.app.listen({ port: 0, host: '127.0.0.1' });
    notificationapi.init(t.account.clientId, t.account.clientSecret, { baseURL });
    await api('POST', '/types', { notificationId: 'comments', title: 'Comments', channels: ['EMAIL', 'INAPP_WEB'] });
  });
  afterEach(() => {
    consoleLog.mockClear();
    consoleError.mockClear();
    // Each test starts from the main environment's credentials.
    notificationapi.init(t.account.clientId, t.account.clientSecret, { baseURL });
  });
  afterAll(async () => {
    consoleLog.mockRestore();
    consoleError.mockRestore();
    await t?.close();
  });

  it('identifyUser: the user Basic with the hashed id; secure mode checks the hash', async () => {
    const res = await notificationapi.identifyUser({ id: 'ada', email: 'ada@example.com', number: '(415) 555-1212', timezone: 'Europe/Paris' });
    expect(res.status).toBe(200);
    expect(res.data).toMatchObject({ id: 'ada', email: 'ada@example.com', number: '+14155551212' });
    expect(await api('GET', '/users/ada')).toMatchObject({ email: 'ada@example.com', number: '+14155551212', timezone: 'Europe/Paris' });

    const env = await api<{ clientId: string; clientSecret: string }>('POST', '/environments', { title: 'Secure' });
    expect((await t.app.inject({ method: 'PATCH', url: `/environments/${env.clientId}`, headers: t.auth, payload: { secureMode: true } })).statusCode).toBe(200);
    notificationapi.init(env.clientId, env.clientSecret, { baseURL });
    expect((await notificationapi.identifyUser({ id: 'grace', email: 'grace@example.com' })).status).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: `/users/grace?envId=${env.clientId}`, headers: t.auth })).json()).toMatchObject({ email: 'grace@example.com' });
    notificationapi.init(env.clientId, 'not-the-secret', { baseURL });
    expect(await refusal(notificationapi.identifyUser({ id: 'grace', email: 'mallory@example.com' }))).toEqual({ status: 401, code: 'UNAUTHORIZED' });
  });

  it('send answers 200, and 202 (which the SDK logs as a warning) only when messages carries warnings', async () => {
    const sent = await notificationapi.send({
      type: 'comments',
      to: { id: 'ada', email: 'ada@example.com' },
      parameters: { name: 'Ada' },
      email: { subject: 'Hi {{ name }}', html: '<p>New comment</p>' },
      inapp: { title: 'New comment for {{ name }}' },
    });
    expect(sent.status).toBe(200);
    expect(sent.data).toEqual({ trackingId: expect.any(String) as unknown, messages: [] });
    expect(warnings()).toEqual([]);
    const log = await processed(sent.data.trackingId);
    expect(log).toMatchObject({ type: 'comments', user_id: 'ada', email_routing: 'SEND', inapp_routing: 'SEND' });

    // The deprecated names (notificationId, user, mergeTags) still work.
    const older = await notificationapi.send({ notificationId: 'comments', user: { id: 'ada', email: 'ada@example.com' }, mergeTags: { name: 'A' }, inapp: { title: 'Old {{ name }}' } });
    expect(older.status).toBe(200);
    expect(await processed(older.data.trackingId)).toMatchObject({ type: 'comments', inapp_routing: 'SEND' });

    const warned = await notificationapi.send({ type: 'comments', to: { id: 'ada' }, templateId: 'no-such-template', inapp: { title: 'x' } });
    expect(warned.status).toBe(202);
    expect(warned.data.messages).toEqual([expect.stringContaining('templateId "no-such-template" was not found') as unknown]);
    expect(warnings()).toEqual([['NotificationAPI warning.', warned.data]]);

    notificationapi.init(t.account.clientId, 'not-the-secret', { baseURL });
    expect(await refusal(notificationapi.send({ type: 'comments', to: { id: 'ada' }, inapp: { title: 'x' } }))).toEqual({ status: 401, code: 'UNAUTHORIZED' });
  });

  it('retract removes the in-app notifications of a type (one sub-notification, then all)', async () => {
    const send = async (subNotificationId: string) => {
      const res: AxiosResponse<{ trackingId: string }> = await notificationapi.send({ type: 'comments', to: { id: 'bo' }, subNotificationId, inapp: { title: `On ${subNotificationId}` } });
      await processed(res.data.trackingId);
      return res.data.trackingId;
    };
    const first = await send('post-1');
    const second = await send('post-2');
    const inbox = async () => (await api<{ notifications: { id: string }[] }>('GET', '/user/inapp?userId=bo&count=50')).notifications.map((n) => n.id).sort();
    expect(await inbox()).toEqual([first, second].sort());

    const one = await notificationapi.retract({ notificationId: 'comments', userId: 'bo', subNotificationId: 'post-1' });
    expect(one.status).toBe(200);
    expect(one.data).toMatchObject({ trackingIds: [first], inappNotifications: 1 });
    expect(await inbox()).toEqual([second]);
    expect((await notificationapi.retract({ notificationId: 'comments', userId: 'bo' })).data).toMatchObject({ inappNotifications: 1 });
    expect(await inbox()).toEqual([]);
  });

  it('setUserPreferences is honoured by sends; deleteUserPreferences (user Basic) resets it', async () => {
    const set = await notificationapi.setUserPreferences('cy', [
      { notificationId: 'comments', channel: 'EMAIL', delivery: 'off' },
      { notificationId: 'comments', channel: 'INAPP_WEB', delivery: 'off', subNotificationId: 'post-9' },
    ]);
    expect(set.status).toBe(200);
    const prefs = async () => (await api<Preferences>('GET', '/users/cy/preferences')).preferences;
    expect(await prefs()).toEqual([
      { notificationId: 'comments', channel: 'EMAIL', delivery: 'off' },
      { notificationId: 'comments', channel: 'INAPP_WEB', delivery: 'off', subNotificationId: 'post-9' },
    ]);
    const sent = await notificationapi.send({ type: 'comments', to: { id: 'cy', email: 'cy@example.com' }, email: { subject: 's', html: '<p>x</p>' }, inapp: { title: 't' } });
    expect(await processed(sent.data.trackingId)).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED', inapp_routing: 'SEND' });

    const one = await notificationapi.deleteUserPreferences('cy', 'comments', 'post-9');
    expect(one.data).toEqual({ success: true, deleted: 1 });
    expect(await prefs()).toEqual([{ notificationId: 'comments', channel: 'EMAIL', delivery: 'off' }]);
    expect((await notificationapi.deleteUserPreferences('cy', 'comments')).data).toEqual({ success: true, deleted: 1 });
    expect(await prefs()).toEqual([]);
    const after = await notificationapi.send({ type: 'comments', to: { id: 'cy', email: 'cy@example.com' }, email: { subject: 's', html: '<p>x</p>' } });
    expect(await processed(after.data.trackingId)).toMatchObject({ email_routing: 'SEND' });
  });

  it('updateSchedule moves and changes a scheduled send; deleteSchedule cancels it', async () => {
    const at = new Date(Date.now() + 86_400_000).toISOString();
    const sent = await notificationapi.send({ type: 'comments', to: { id: 'dee' }, inapp: { title: 'Later' }, schedule: at });
    expect(sent.status).toBe(200);
    const trackingId = sent.data.trackingId as string;
    expect(await logOf(trackingId)).toMatchObject({ scheduled_for: at });

    const later = new Date(Date.now() + 2 * 86_400_000).toISOString();
    const updated = await notificationapi.updateSchedule(trackingId, { schedule: later, inapp: { title: 'Later still' } });
    expect(updated.status).toBe(200);
    const moved = await logOf(trackingId);
    expect(moved).toMatchObject({ scheduled_for: later, schedule_updated_to: later });
    expect(JSON.parse(String(moved?.request))).toMatchObject({ type: 'comments', inapp: { title: 'Later still' } });

    const deleted = await notificationapi.deleteSchedule(trackingId);
    expect(deleted.status).toBe(200);
    expect((await logOf(trackingId))?.schedule_deleted_at).toEqual(expect.any(String));
    expect(await refusal(notificationapi.deleteSchedule(trackingId))).toEqual({ status: 409, code: 'CONFLICT' });
  });

  it('queryLogs takes its own filter shape; the result is read with GET /logs/query/{queryId}', async () => {
    const start = Math.floor(Date.now() / 1000) - 1;
    const email = await notificationapi.send({ type: 'digest', to: { id: 'eve', email: 'eve@example.com' }, email: { subject: 'marker-7 inside', html: '<p>x</p>' } });
    const inapp = await notificationapi.send({ type: 'digest', to: { id: 'eve' }, inapp: { title: 'y' } });
    const other = await notificationapi.send({ type: 'digest', to: { id: 'fay' }, inapp: { title: 'z' } });
    for (const res of [email, inapp, other]) await processed(res.data.trackingId);
    const result = async (body: Parameters<typeof notificationapi.queryLogs>[0]): Promise<string[]> => {
      const res = await notificationapi.queryLogs(body);
      expect(res.status).toBe(200);
      const done = await eventually(async () => {
        const r = await api<{ status: string; logs?: Log[] }>('GET', `/logs/query/${res.data.queryId}`);
        return r.status === 'Complete' ? r : undefined;
      }, 15_000, 'log query');
      return done.logs!.map((l) => String(l.trackingId)).sort();
    };
    const all = [email, inapp, other].map((r) => r.data.trackingId as string);
    expect(await result({ notificationFilter: ['digest'], dateRangeFilter: { startTime: start } })).toEqual([...all].sort());
    expect(await result({ notificationFilter: ['digest'], userFilter: ['eve'] })).toEqual([all[0], all[1]].sort());
    expect(await result({ notificationFilter: ['digest'], channelFilter: [Channels.INAPP_WEB] })).toEqual([all[1], all[2]].sort());
    // The spec's VOICE (not in this SDK's enum): accepted, and no send of this server delivers over it.
    expect(await result({ notificationFilter: ['digest'], channelFilter: ['VOICE' as Channels, Channels.INAPP_WEB] })).toEqual([all[1], all[2]].sort());
    expect(await result({ notificationFilter: ['digest'], channelFilter: ['VOICE' as Channels] })).toEqual([]);
    expect(await result({ trackingIds: [all[2], all[0]], statusFilter: ['delivered', 'sent'] })).toEqual([all[0], all[2]].sort());
    expect(await result({ notificationFilter: ['digest'], requestFilter: ['marker-7'] })).toEqual([all[0]]);
    expect(await result({ notificationFilter: ['digest'], dateRangeFilter: { endTime: start - 60 } })).toEqual([]);
    expect(await refusal(notificationapi.queryLogs({ customFilter: 'fields @timestamp' }))).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('updateInAppNotification sets statuses and a reply (user Basic with the hashed id)', async () => {
    const sent = await notificationapi.send({ type: 'comments', to: { id: 'gus' }, inapp: { title: 'Hello' } });
    const trackingId = sent.data.trackingId as string;
    await processed(trackingId);
    const opened = new Date(Date.now() - 1000).toISOString();
    const res = await notificationapi.updateInAppNotification('gus', {
      trackingIds: [trackingId],
      opened,
      archived: opened,
      actioned1: opened,
      reply: { date: opened, message: 'Thanks!' },
    });
    expect(res.status).toBe(200);
    const [notification] = (await api<{ notifications: Log[] }>('GET', '/user/inapp?userId=gus')).notifications;
    expect(notification).toMatchObject({ id: trackingId, opened, archived: opened, actioned1: opened, replies: [{ date: opened, message: 'Thanks!' }] });
  });

  it('createSubNotification lists it in the preferences; deleteSubNotification removes it', async () => {
    const created = await notificationapi.createSubNotification({ notificationId: 'comments', subNotificationId: 'thread-3', title: 'Thread 3' });
    expect(created.status).toBe(200);
    const subs = async () => (await api<Preferences>('GET', '/users/hal/preferences')).subNotifications;
    expect(await subs()).toEqual([{ notificationId: 'comments', subNotificationId: 'thread-3', title: 'Thread 3' }]);
    const deleted = await notificationapi.deleteSubNotification({ notificationId: 'comments', subNotificationId: 'thread-3' });
    expect(deleted.status).toBe(200);
    expect(await subs()).toEqual([]);
  });
});

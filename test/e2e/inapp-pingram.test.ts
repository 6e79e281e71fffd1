import { randomUUID } from 'node:crypto';
import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { InappService, type StoreInappInput } from '../../src/modules/inapp/inapp.service.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/**
 * The pingram SDK's UserApi (GET/PATCH /user/inapp[/unread]) carries no user parameter: the user
 * is in the Basic credentials (`username:password` = `clientId:userId[:userHash]`). With the
 * Pingram wrapper that is its `headers.Authorization` override; with an API key the server reads
 * `?userId=` (not something the SDK sends, so not exercised here).
 */
describe.each(STORAGE_KINDS)('pingram SDK user in-app calls (%s)', (kind) => {
  let t: TestContext;
  let service: InappService;
  let baseUrl: string;

  beforeAll(async () => {
    t = await createTestContext(kind);
    service = new InappService(t.deps);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    baseUrl = `http://127.0.0.1:${address.port}`;
  });
  afterAll(() => t.close());

  const asUser = (clientId: string, userId: string, hash?: string) =>
    new Pingram({
      apiKey: 'unused-for-user-calls',
      baseUrl,
      headers: { Authorization: `Basic ${Buffer.from([clientId, userId, ...(hash ? [hash] : [])].join(':')).toString('base64')}` },
    });
  const input = (envId: string, userId: string, extra: Partial<StoreInappInput>): StoreInappInput => ({
    accountId: t.account.accountId,
    envId,
    userId,
    trackingId: randomUUID(),
    notificationId: 'digest',
    title: 'Weekly digest',
    ...extra,
  });

  it('lists, counts, patches and marks seen through UserApi', async () => {
    const userId = `sdk-${randomUUID()}`;
    await service.store(t.deps.db, input(t.account.clientId, userId, { trackingId: 'd1', date: '2026-01-10T00:00:00.000Z', parameters: { week: 2 } }));
    await service.store(t.deps.db, input(t.account.clientId, userId, { trackingId: 'd2', date: '2026-01-17T00:00:00.000Z' }));
    const client = asUser(t.account.clientId, userId);

    const listed = await client.user.getInAppNotifications(undefined, 1);
    expect(listed.notifications.map((n) => n.id)).toEqual(['d2']);
    const older = await client.user.getInAppNotifications('2026-01-17T00:00:00.000Z');
    expect(older.notifications).toEqual([{ id: 'd1', notificationId: 'digest', seen: false, title: 'Weekly digest', date: '2026-01-10T00:00:00.000Z', parameters: { week: 2 } }]);
    expect(await client.user.getInAppUnreadCount()).toEqual({ count: 2 });

    expect(
      await client.user.updateInAppNotificationStatus({
        trackingIds: ['d1'],
        clicked: '2026-01-18T08:00:00.000Z',
        actioned2: '2026-01-18T08:01:00.000Z',
        reply: { date: '2026-01-18T08:02:00.000Z', message: 'Unsubscribe me' },
      }),
    ).toEqual({ success: true });
    expect(await client.user.markInAppNotificationsAsSeen({ trackingId: 'd2' })).toEqual({ success: true });
    expect(await client.user.getInAppUnreadCount()).toEqual({ count: 1 });

    const [d2, d1] = (await client.user.getInAppNotifications()).notifications;
    expect(d2).toMatchObject({ id: 'd2', seen: true });
    expect(d1).toMatchObject({
      id: 'd1',
      seen: false,
      clicked: '2026-01-18T08:00:00.000Z',
      actioned2: '2026-01-18T08:01:00.000Z',
      replies: [{ date: '2026-01-18T08:02:00.000Z', message: 'Unsubscribe me' }],
    });
  });

  it('needs the user hash in secure mode', async () => {
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Secure' } })).json();
    await t.app.inject({ method: 'PATCH', url: `/environments/${env.clientId}`, headers: t.auth, payload: { secureMode: true } });
    const userId = `sdk-${randomUUID()}`;
    await service.store(t.deps.db, input(env.clientId, userId, { trackingId: 's1' }));

    const refused = await asUser(env.clientId, userId).user.getInAppUnreadCount().then(
      () => null,
      (err: { response?: Response }) => err.response,
    );
    expect(refused?.status).toBe(401);
    expect((await refused!.json()).error.code).toBe('UNAUTHORIZED');
    expect(await asUser(env.clientId, userId, userHash(env.clientSecret, userId)).user.getInAppUnreadCount()).toEqual({ count: 1 });
  });
});

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { InappService, type StoreInappInput } from '../../src/modules/inapp/inapp.service.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const basic = (clientId: string, userId: string, hash?: string) => ({
  authorization: `Basic ${Buffer.from(hash ? `${clientId}:${userId}:${hash}` : `${clientId}:${userId}`).toString('base64')}`,
});

describe.each(STORAGE_KINDS)('in-app notifications (%s)', (kind) => {
  let t: TestContext;
  let service: InappService;
  const clock = new ManualClock(new Date('2026-01-15T10:00:00.000Z'));

  beforeAll(async () => {
    t = await createTestContext(kind, { clock });
    service = new InappService(t.deps);
  });
  afterAll(() => t.close());

  const user = () => `user-${randomUUID()}`;
  const input = (userId: string, extra: Partial<StoreInappInput> = {}): StoreInappInput => ({
    accountId: t.account.accountId,
    envId: t.account.clientId,
    userId,
    trackingId: randomUUID(),
    notificationId: 'order_shipped',
    title: 'Your order shipped',
    ...extra,
  });
  const list = async (userId: string, query = '') => {
    const res = await t.app.inject({ method: 'GET', url: `/user/inapp${query}`, headers: basic(t.account.clientId, userId) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().notifications as Array<Record<string, unknown>>;
  };
  const unread = async (userId: string) => {
    const res = await t.app.inject({ method: 'GET', url: '/user/inapp/unread', headers: basic(t.account.clientId, userId) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().count as number;
  };

  it('returns the stored notification with every field of the interface', async () => {
    const u = user();
    const stored = await service.store(
      t.deps.db,
      input(u, {
        trackingId: 'trk-full',
        subNotificationId: 'order-42',
        redirectURL: 'https://shop.example/orders/42',
        imageURL: 'https://shop.example/box.png',
        parameters: { orderId: 42, name: 'Ada' },
        deliveryOptions: { defaultDeliveryOption: 'instant', instant: { enabled: true }, off: { enabled: true } },
        expDate: '2027-01-01T00:00:00.000Z',
      }),
    );
    expect(stored.created).toBe(true);
    const expected = {
      id: 'trk-full',
      notificationId: 'order_shipped',
      subNotificationId: 'order-42',
      seen: false,
      title: 'Your order shipped',
      redirectURL: 'https://shop.example/orders/42',
      imageURL: 'https://shop.example/box.png',
      deliveryOptions: { defaultDeliveryOption: 'instant', instant: { enabled: true }, off: { enabled: true } },
      parameters: { orderId: 42, name: 'Ada' },
      date: clock.now().toISOString(),
      expDate: '2027-01-01T00:00:00.000Z',
    };
    expect(stored.notification).toEqual(expected);
    expect(await list(u)).toEqual([expected]);
  });

  it('lists newest first, 10 by default, honours count and before (ISO, epoch, or the client\'s "undefined")', async () => {
    const u = user();
    const base = Date.parse('2026-02-01T00:00:00.000Z');
    for (let i = 0; i < 12; i++) {
      await service.store(t.deps.db, input(u, { trackingId: `n${String(i).padStart(2, '0')}`, date: new Date(base + i * 60_000).toISOString() }));
    }
    const ids = (items: Array<Record<string, unknown>>) => items.map((n) => n.id);
    expect(ids(await list(u))).toEqual(['n11', 'n10', 'n09', 'n08', 'n07', 'n06', 'n05', 'n04', 'n03', 'n02']);
    expect(ids(await list(u, '?count=3'))).toEqual(['n11', 'n10', 'n09']);
    expect(ids(await list(u, '?count=100'))).toHaveLength(12);
    const n05 = new Date(base + 5 * 60_000);
    expect(ids(await list(u, `?before=${n05.toISOString()}&count=2`))).toEqual(['n04', 'n03']);
    expect(ids(await list(u, `?before=${n05.getTime()}&count=2`))).toEqual(['n04', 'n03']);
    expect(ids(await list(u, `?before=${Math.floor(n05.getTime() / 1000)}&count=2`))).toEqual(['n04', 'n03']);
    expect(ids(await list(u, '?count=2&before=undefined'))).toEqual(['n11', 'n10']);
  });

  it('pages through notifications that share a date without losing any (the client pages with before = the last date it got)', async () => {
    const u = user();
    const base = Date.parse('2026-03-01T00:00:00.000Z');
    // One worker batch stores its rows at one instant: groups of 4 with one date each.
    const stored: string[] = [];
    for (let i = 0; i < 14; i++) {
      const trackingId = `t${String(i).padStart(2, '0')}`;
      stored.push(trackingId);
      await service.store(t.deps.db, input(u, { trackingId, date: new Date(base + Math.floor(i / 4) * 1000).toISOString() }));
    }
    for (const count of [1, 2, 3, 5]) {
      const seen: string[] = [];
      let before = '';
      for (let pages = 0; pages < 20; pages++) {
        const page = await list(u, `?count=${count}${before ? `&before=${before}` : ''}`);
        if (page.length === 0) break;
        expect(page.length, `count ${count}`).toBeGreaterThanOrEqual(Math.min(count, stored.length - seen.length));
        seen.push(...page.map((n) => n.id as string));
        before = page.at(-1)!.date as string;
      }
      expect(seen, `count ${count}`).toEqual([...stored].reverse());
    }
    // A page is extended by the rest of its last date's group, and only then (groups: t12-t13, t08-t11, ...).
    expect((await list(u, '?count=1')).map((n) => n.id)).toEqual(['t13', 't12']);
    expect((await list(u, '?count=2')).map((n) => n.id)).toEqual(['t13', 't12']);
    expect((await list(u, '?count=3')).map((n) => n.id)).toEqual(['t13', 't12', 't11', 't10', 't09', 't08']);
    expect((await list(u, '?count=6')).map((n) => n.id)).toEqual(['t13', 't12', 't11', 't10', 't09', 't08']);
  });

  it('rejects a malformed before or count with VALIDATION_FAILED', async () => {
    for (const query of ['?before=yesterday-ish', '?count=0', '?count=abc', '?count=5000']) {
      const res = await t.app.inject({ method: 'GET', url: `/user/inapp${query}`, headers: basic(t.account.clientId, 'u') });
      expect(res.statusCode, query).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
      expect(typeof res.json().trackingId).toBe('string');
    }
  });

  it('leaves expired notifications out of the list and the unread count', async () => {
    const u = user();
    await service.store(t.deps.db, input(u, { trackingId: 'expired', expDate: '2026-01-15T09:00:00.000Z' }));
    await service.store(t.deps.db, input(u, { trackingId: 'live', expDate: '2026-01-15T11:00:00.000Z' }));
    expect((await list(u)).map((n) => n.id)).toEqual(['live']);
    expect(await unread(u)).toBe(1);
  });

  it('counts unseen notifications and marks them seen: by trackingId, by type, then all', async () => {
    const u = user();
    await service.store(t.deps.db, input(u, { trackingId: 'a' }));
    await service.store(t.deps.db, input(u, { trackingId: 'b', notificationId: 'welcome' }));
    await service.store(t.deps.db, input(u, { trackingId: 'c' }));
    await service.store(t.deps.db, input(u, { trackingId: 'd' }));
    expect(await unread(u)).toBe(4);

    const patch = (payload: unknown) =>
      t.app.inject({ method: 'PATCH', url: '/user/inapp/unread', headers: basic(t.account.clientId, u), payload: payload as object });
    expect((await patch({ trackingId: 'a' })).json()).toEqual({ success: true });
    expect(await unread(u)).toBe(3);
    await patch({ notificationId: 'welcome' });
    expect(await unread(u)).toBe(2);
    const seen = Object.fromEntries((await list(u)).map((n) => [n.id, n.seen]));
    expect(seen).toEqual({ a: true, b: true, c: false, d: false });
    expect((await patch({})).statusCode).toBe(200);
    expect(await unread(u)).toBe(0);
    expect((await list(u)).every((n) => n.seen === true)).toBe(true);
  });

  it('reads dates in ISO forms and epochs only: free text and days that do not exist are refused, not stored as another date', async () => {
    const u = user();
    await service.store(t.deps.db, input(u, { trackingId: 'd1' }));
    const patch = (payload: object) => t.app.inject({ method: 'PATCH', url: '/user/inapp', headers: basic(t.account.clientId, u), payload });
    for (const archived of ['hello 12', 'May 5', '-5', '2026-02-30', '2026-13-01', 'Dec 7 2026']) {
      const res = await patch({ trackingIds: ['d1'], archived });
      expect(res.statusCode, archived).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    expect((await list(u))[0].archived).toBeUndefined();
    for (const before of ['-5', 'May%201', '2026-02-30']) {
      const res = await t.app.inject({ method: 'GET', url: `/user/inapp?before=${before}`, headers: basic(t.account.clientId, u) });
      expect(res.statusCode, before).toBe(400);
    }
    // A reply's date as an epoch number, as the README lists it.
    const replied = await patch({ trackingIds: ['d1'], reply: { date: Date.parse('2026-01-15T10:09:00.000Z'), message: 'On my way' } });
    expect(replied.statusCode, replied.body).toBe(200);
    expect((await list(u))[0].replies).toEqual([{ date: '2026-01-15T10:09:00.000Z', message: 'On my way' }]);
  });

  it('sets, clears and appends statuses and replies with PATCH /user/inapp', async () => {
    const u = user();
    await service.store(t.deps.db, input(u, { trackingId: 'p1' }));
    await service.store(t.deps.db, input(u, { trackingId: 'p2' }));
    const patch = (payload: object) => t.app.inject({ method: 'PATCH', url: '/user/inapp', headers: basic(t.account.clientId, u), payload });

    const res = await patch({
      trackingIds: ['p1', 'p2', 'not-mine'],
      opened: '2026-01-15T10:05:00.000Z',
      clicked: true,
      archived: '2026-01-15T10:06:00Z',
      actioned1: Date.parse('2026-01-15T10:07:00.000Z'),
      reply: { date: '2026-01-15T10:08:00.000Z', message: 'Thanks!' },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true });
    await patch({ trackingIds: ['p1'], archived: null, replies: [{ date: '2026-01-15T10:09:00.000Z', message: 'Second' }] });
    await patch({ trackingIds: ['p2'], actioned2: '2026-01-15T10:10:00.000Z', actioned1: false });

    const byId = Object.fromEntries((await list(u)).map((n) => [n.id, n]));
    expect(byId.p1).toMatchObject({
      opened: '2026-01-15T10:05:00.000Z',
      clicked: clock.now().toISOString(),
      actioned1: '2026-01-15T10:07:00.000Z',
      replies: [
        { date: '2026-01-15T10:08:00.000Z', message: 'Thanks!' },
        { date: '2026-01-15T10:09:00.000Z', message: 'Second' },
      ],
    });
    expect(byId.p1.archived).toBeUndefined();
    expect(byId.p2).toMatchObject({
      archived: '2026-01-15T10:06:00.000Z',
      actioned2: '2026-01-15T10:10:00.000Z',
      replies: [{ date: '2026-01-15T10:08:00.000Z', message: 'Thanks!' }],
    });
    expect(byId.p2.actioned1).toBeUndefined();
    // Archived notifications are not counted as unread.
    expect(await unread(u)).toBe(1);

    const bad = await patch({ trackingIds: ['p1'], opened: 'not a date' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('VALIDATION_FAILED');
    expect((await patch({ opened: true })).statusCode).toBe(400);
  });

  it('stores idempotently per (environment, user, trackingId)', async () => {
    const u = user();
    const first = await service.store(t.deps.db, input(u, { trackingId: 'retry-me', title: 'First attempt' }));
    clock.advance(1000);
    const again = await t.deps.db.transaction().execute((trx) => service.store(trx, input(u, { trackingId: 'retry-me', title: 'Second attempt' })));
    expect(first.created).toBe(true);
    expect(again.created).toBe(false);
    expect(again.notification).toEqual(first.notification);
    expect(await list(u)).toEqual([first.notification]);
    // The same trackingId for another user is another notification.
    const other = user();
    expect((await service.store(t.deps.db, input(other, { trackingId: 'retry-me' }))).created).toBe(true);
  });

  it('does not store when the surrounding transaction rolls back', async () => {
    const u = user();
    await expect(
      t.deps.db.transaction().execute(async (trx) => {
        await service.store(trx, input(u, { trackingId: 'rolled-back' }));
        throw new Error('worker crashed');
      }),
    ).rejects.toThrow('worker crashed');
    expect(await list(u)).toEqual([]);
  });

  it('keeps users, environments and accounts apart', async () => {
    const u = user();
    await service.store(t.deps.db, input(u, { trackingId: 'mine' }));
    const env2 = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Staging' } })).json();
    const other = await t.newAccount();
    await service.store(t.deps.db, input(u, { envId: env2.clientId, trackingId: 'staging-one' }));
    await service.store(t.deps.db, input(u, { accountId: other.accountId, envId: other.clientId, trackingId: 'other-account' }));

    expect((await list(u)).map((n) => n.id)).toEqual(['mine']);
    expect(await list(user())).toEqual([]);
    const inEnv2 = await t.app.inject({ method: 'GET', url: '/user/inapp', headers: basic(env2.clientId, u) });
    expect(inEnv2.json().notifications.map((n: { id: string }) => n.id)).toEqual(['staging-one']);
    const inOther = await t.app.inject({ method: 'GET', url: '/user/inapp', headers: basic(other.clientId, u) });
    expect(inOther.json().notifications.map((n: { id: string }) => n.id)).toEqual(['other-account']);

    // Another user cannot patch or mark seen what is not theirs.
    const intruder = basic(t.account.clientId, 'intruder');
    await t.app.inject({ method: 'PATCH', url: '/user/inapp', headers: intruder, payload: { trackingIds: ['mine'], opened: true, reply: { date: '2026-01-01', message: 'x' } } });
    await t.app.inject({ method: 'PATCH', url: '/user/inapp/unread', headers: intruder, payload: {} });
    const [mine] = await list(u);
    expect(mine).toMatchObject({ id: 'mine', seen: false });
    expect(mine.opened).toBeUndefined();
    expect(mine.replies).toBeUndefined();
  });

  it('requires the right user hash in secure mode', async () => {
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Secure' } })).json();
    await t.app.inject({ method: 'PATCH', url: `/environments/${env.clientId}`, headers: t.auth, payload: { secureMode: true } });
    const u = user();
    await service.store(t.deps.db, input(u, { envId: env.clientId, trackingId: 'secret' }));
    const hash = userHash(env.clientSecret, u);
    expect(hash).toMatch(/^[A-Za-z0-9+/]{43}=$/);

    const cases = [
      { headers: basic(env.clientId, u), why: 'no hash' },
      { headers: basic(env.clientId, u, userHash(env.clientSecret, 'someone-else')), why: "another user's hash" },
      { headers: basic(env.clientId, u, userHash('wrong-secret', u)), why: 'wrong secret' },
      { headers: {}, why: 'no credentials' },
      { headers: basic('unknown-client', u), why: 'unknown clientId' },
    ];
    for (const { headers, why } of cases) {
      for (const url of ['/user/inapp', '/user/inapp/unread', `/${env.clientId}/users/${u}/notifications/INAPP_WEB`]) {
        const res = await t.app.inject({ method: 'GET', url, headers });
        expect(res.statusCode, `${why} ${url}`).toBe(401);
        expect(res.json().error.code).toBe('UNAUTHORIZED');
        expect(typeof res.json().trackingId).toBe('string');
      }
    }
    const ok = await t.app.inject({ method: 'GET', url: '/user/inapp', headers: basic(env.clientId, u, hash) });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().notifications.map((n: { id: string }) => n.id)).toEqual(['secret']);
    const viaPath = await t.app.inject({ method: 'GET', url: `/${env.clientId}/users/${u}/notifications/INAPP_WEB`, headers: basic(env.clientId, u, hash) });
    expect(viaPath.statusCode).toBe(200);
    // Outside secure mode the hash is not needed.
    expect((await t.app.inject({ method: 'GET', url: '/user/inapp', headers: basic(t.account.clientId, u) })).statusCode).toBe(200);
  });

  it('serves the published in-app client paths, reading its text/plain JSON bodies', async () => {
    const u = 'ada@example.com';
    const headers = basic(t.account.clientId, u);
    const base = `/${t.account.clientId}/users/${encodeURIComponent(u)}/notifications/INAPP_WEB`;
    await service.store(t.deps.db, input(u, { trackingId: 'core-1', date: '2026-01-15T09:00:00.000Z' }));
    await service.store(t.deps.db, input(u, { trackingId: 'core-2', date: '2026-01-15T09:30:00.000Z' }));

    const listed = await t.app.inject({ method: 'GET', url: `${base}?count=100&before=undefined`, headers });
    expect(listed.json().notifications.map((n: { id: string }) => n.id)).toEqual(['core-2', 'core-1']);

    const patched = await t.app.inject({
      method: 'PATCH',
      url: base,
      headers: { ...headers, 'content-type': 'text/plain;charset=UTF-8' },
      payload: JSON.stringify({ trackingIds: ['core-1'], opened: '2026-01-15T10:01:00.000Z', archived: null }),
    });
    expect(patched.statusCode, patched.body).toBe(200);
    const count = await t.app.inject({ method: 'GET', url: `${base}/unread`, headers });
    expect(count.json()).toEqual({ count: 2 });
    expect((await t.app.inject({ method: 'PATCH', url: `${base}/unread`, headers })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: `${base}/unread`, headers })).json()).toEqual({ count: 0 });
    const after = await t.app.inject({ method: 'GET', url: `${base}?count=1&before=2026-01-15T09:30:00.000Z`, headers });
    expect(after.json().notifications).toEqual([expect.objectContaining({ id: 'core-1', opened: '2026-01-15T10:01:00.000Z', seen: true })]);

    // Credentials must name the user and clientId of the path.
    const otherUser = await t.app.inject({ method: 'GET', url: base, headers: basic(t.account.clientId, 'someone-else') });
    expect(otherUser.statusCode).toBe(401);
    const bad = await t.app.inject({ method: 'PATCH', url: base, headers: { ...headers, 'content-type': 'text/plain' }, payload: '{not json' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('INVALID_JSON');
  });

  it('lets an API key act for a user named in ?userId=', async () => {
    const u = user();
    await service.store(t.deps.db, input(u, { trackingId: 'by-key' }));
    const res = await t.app.inject({ method: 'GET', url: `/user/inapp?userId=${u}`, headers: t.auth });
    expect(res.json().notifications.map((n: { id: string }) => n.id)).toEqual(['by-key']);
    const missing = await t.app.inject({ method: 'GET', url: '/user/inapp', headers: t.auth });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error.code).toBe('VALIDATION_FAILED');
    const other = await t.newAccount();
    const foreign = await t.app.inject({ method: 'GET', url: `/user/inapp?userId=${u}`, headers: { authorization: `Bearer ${other.apiKey}` } });
    expect(foreign.json().notifications).toEqual([]);
  });

  it('lets the client credentials (Basic clientId:clientSecret) act for ?userId=, as the other server credentials do', async () => {
    const u = user();
    await service.store(t.deps.db, input(u, { trackingId: 'by-client' }));
    const res = await t.app.inject({ method: 'GET', url: `/user/inapp?userId=${u}`, headers: basic(t.account.clientId, t.account.clientSecret) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().notifications.map((n: { id: string }) => n.id)).toEqual(['by-client']);
    const count = await t.app.inject({ method: 'GET', url: `/user/inapp/unread?userId=${u}`, headers: basic(t.account.clientId, t.account.clientSecret) });
    expect(count.json()).toEqual({ count: 1 });
    // Without ?userId= the same header shape is an end user's clientId:userId, as before.
    await service.store(t.deps.db, input(t.account.clientSecret, { trackingId: 'named-like-the-secret' }));
    const own = await t.app.inject({ method: 'GET', url: '/user/inapp', headers: basic(t.account.clientId, t.account.clientSecret) });
    expect(own.json().notifications.map((n: { id: string }) => n.id)).toEqual(['named-like-the-secret']);
    // An end user's Basic credentials with a ?userId= still act for that end user only.
    const enduser = await t.app.inject({ method: 'GET', url: `/user/inapp?userId=${u}`, headers: basic(t.account.clientId, 'someone-else') });
    expect(enduser.statusCode).toBe(200);
    expect(enduser.json().notifications).toEqual([]);
    // Another environment's client credentials never read this one's users.
    const other = await t.newAccount();
    const foreign = await t.app.inject({ method: 'GET', url: `/user/inapp?userId=${u}`, headers: basic(other.clientId, other.clientSecret) });
    expect(foreign.json().notifications ?? []).toEqual([]);
  });
});

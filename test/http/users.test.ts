import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signAccountToken } from '../../src/modules/auth/jwt.js';
import { UsersService } from '../../src/modules/users/users.service.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { bearer, fcmToken, usersApi, webPushSubscription } from './users-helpers.js';

const T0 = '2026-01-15T10:00:00.000Z';

describe.each(STORAGE_KINDS)('users (%s)', (kind) => {
  let t: TestContext;
  let clock: ManualClock;
  let api: ReturnType<typeof usersApi>;
  let service: UsersService;

  beforeAll(async () => {
    clock = new ManualClock(new Date(T0));
    t = await createTestContext(kind, { clock });
    api = usersApi(t);
    service = new UsersService(t.deps);
  });
  afterAll(() => t?.close());

  it('identify creates a user with normalized fields and read-only timestamps', async () => {
    const web = webPushSubscription();
    const res = await api.identify('alice', {
      id: 'alice',
      email: 'alice@example.com',
      number: '(415) 555-0123',
      timezone: 'America/New_York',
      slackChannel: '#alerts',
      slackToken: { ok: true, access_token: 'xoxb-1', team: { id: 'T1', name: 'Team' } },
      pushTokens: [fcmToken(), { type: 'APN', token: 'apn-1', device: { device_id: 'iphone', model: '15' }, environment: 'production' }],
      webPushTokens: [web],
      properties: { plan: 'pro', seats: 3, beta: true },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: 'alice',
      email: 'alice@example.com',
      number: '+14155550123',
      timezone: 'America/New_York',
      slackChannel: '#alerts',
      // Masked on every read (short tokens show only their kind).
      slackToken: { ok: true, access_token: 'xoxb-…', team: { id: 'T1', name: 'Team' } },
      pushTokens: [
        { type: 'FCM', token: 'fcm-token-1', device: { device_id: 'pixel-1' }, environment: 'undefined' },
        { type: 'APN', token: 'apn-1', device: { device_id: 'iphone', model: '15' }, environment: 'production' },
      ],
      webPushTokens: [web],
      properties: { plan: 'pro', seats: 3, beta: true },
      lastSeenTime: T0,
      createdAt: T0,
      updatedAt: T0,
    });
    expect((await api.get('alice')).body).toEqual(res.body);
  });

  it('incremental identify merges properties, replaces provided fields, preserves the rest', async () => {
    clock.advance(60_000);
    const res = await api.identify('alice', { properties: { seats: 5, region: 'eu' }, pushTokens: [fcmToken('fcm-token-2', 'pixel-2')] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      email: 'alice@example.com',
      number: '+14155550123',
      timezone: 'America/New_York',
      properties: { plan: 'pro', seats: 5, beta: true, region: 'eu' },
      createdAt: T0,
      lastSeenTime: '2026-01-15T10:01:00.000Z',
      updatedAt: '2026-01-15T10:01:00.000Z',
    });
    // A provided array replaces the stored one (it is not appended to).
    expect(res.body.pushTokens).toEqual([{ type: 'FCM', token: 'fcm-token-2', device: { device_id: 'pixel-2' }, environment: 'undefined' }]);
    expect(res.body.webPushTokens).toHaveLength(1);

    clock.advance(60_000);
    const cleared = await api.identify('alice', { properties: { beta: null }, email: null, slackToken: null });
    expect(cleared.body.properties).toEqual({ plan: 'pro', seats: 5, region: 'eu' });
    expect(cleared.body).not.toHaveProperty('email');
    expect(cleared.body).not.toHaveProperty('slackToken');
    expect(cleared.body).toMatchObject({ number: '+14155550123', createdAt: T0, lastSeenTime: '2026-01-15T10:02:00.000Z' });
    expect((await api.get('alice')).body).toEqual(cleared.body);
  });

  it('rejects a body id that differs from the path; a body without id uses the path id', async () => {
    const res = await api.identify('bob', { id: 'robert', email: 'bob@example.com' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_FAILED');
    expect(res.body.error.message).toContain('"robert"');
    expect(res.body.error.message).toContain('"bob"');
    expect(res.body.error.fix).toBeTruthy();
    expect((await api.get('robert')).status).toBe(404);

    const ok = await api.identify('bob', { email: 'bob@example.com' });
    expect(ok.status).toBe(200);
    expect(ok.body.id).toBe('bob');
    expect((await api.identify('bob', { id: 'bob' })).status).toBe(200);
  });

  it('accepts ids with reserved URL characters', async () => {
    const res = await api.identify('carol@example.com/x', { email: 'carol@example.com' });
    expect(res.status).toBe(200);
    expect((await api.get('carol@example.com/x')).body.email).toBe('carol@example.com');
  });

  it('answers 404 NOT_FOUND for an absent user on GET and DELETE', async () => {
    for (const res of [await api.get('nobody'), await api.remove('nobody')]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('NOT_FOUND');
      expect(res.body.error.message).toContain('nobody');
    }
  });

  it('DELETE removes the user', async () => {
    await api.identify('dave', { email: 'dave@example.com' });
    const res = await api.remove('dave');
    expect(res).toEqual({ status: 200, body: { message: 'User deleted' } });
    expect((await api.get('dave')).status).toBe(404);
    expect((await api.remove('dave')).status).toBe(404);
  });

  it('suppressions: emailSuppressionStatus shows the EMAIL entry; DELETE removes one channel only', async () => {
    await api.identify('erin', { email: 'erin@example.com', number: '+14155550100' });
    await service.setSuppression(t.account.accountId, t.account.clientId, 'erin', 'EMAIL', { reason: 'Bounce', details: { code: '550 5.1.1' } });
    await service.setSuppression(t.account.accountId, t.account.clientId, 'erin', 'SMS', { reason: 'STOP', details: {} });
    expect((await api.get('erin')).body.emailSuppressionStatus).toEqual({ reason: 'Bounce', details: { code: '550 5.1.1' } });
    // A suppression is not an identify: identify keeps it.
    expect((await api.identify('erin', { timezone: 'UTC' })).body.emailSuppressionStatus).toEqual({ reason: 'Bounce', details: { code: '550 5.1.1' } });

    clock.advance(1000);
    const res = await api.unsuppress('erin', 'EMAIL');
    expect(res.status).toBe(200);
    expect(res.body.user).toMatchObject({ id: 'erin', email: 'erin@example.com', updatedAt: clock.now().toISOString() });
    expect(res.body.user).not.toHaveProperty('emailSuppressionStatus');
    expect((await api.get('erin')).body).not.toHaveProperty('emailSuppressionStatus');
    expect(Object.keys(await service.suppressions(t.account.accountId, t.account.clientId, 'erin'))).toEqual(['SMS']);
    // Idempotent.
    expect((await api.unsuppress('erin', 'EMAIL')).status).toBe(200);
  });

  it('suppression removal: unknown channel 400, absent user 404, JWT needs envId', async () => {
    const bad = await api.unsuppress('erin', 'FAX');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('VALIDATION_FAILED');
    expect(bad.body.error.message).toContain('channel');
    expect((await api.unsuppress('nobody', 'EMAIL')).status).toBe(404);
    expect(await service.setSuppression(t.account.accountId, t.account.clientId, 'nobody', 'EMAIL', { reason: 'Bounce' })).toBeNull();

    const jwt = bearer(await signAccountToken(t.deps.secrets, { accountId: t.account.accountId, subject: 'test' }, 3600, clock.now()));
    const noEnv = await api.unsuppress('erin', 'EMAIL', jwt);
    expect(noEnv.status).toBe(400);
    expect(noEnv.body.error.code).toBe('ENVIRONMENT_REQUIRED');
    const withEnv = await api.unsuppress('erin', 'EMAIL', jwt, `?envId=${t.account.clientId}`);
    expect(withEnv.status).toBe(200);
    expect(withEnv.body.user.id).toBe('erin');
  });

  it('lists newest first across pages without duplicates (cursor on createdAt, id)', async () => {
    const other = await t.newAccount('Paging account');
    const key = bearer(other.apiKey);
    const expected: string[] = [];
    for (let i = 0; i < 7; i++) {
      clock.advance(1000);
      await api.identify(`p${i}`, { properties: { i } }, key);
      expected.unshift(`p${i}`);
    }
    // Three users created in the same millisecond: the id breaks the tie (descending).
    clock.advance(1000);
    for (const id of ['t-a', 't-c', 't-b']) await api.identify(id, {}, key);
    expected.unshift('t-c', 't-b', 't-a');

    const seen: string[] = [];
    let token = '';
    let pages = 0;
    for (;;) {
      const res = await api.list(`?limit=3&nextToken=${encodeURIComponent(token)}`, key);
      expect(res.status).toBe(200);
      pages++;
      seen.push(...res.body.users.map((u: { id: string }) => u.id));
      if (!res.body.hasMore) {
        expect(res.body).not.toHaveProperty('lastEvaluatedKey');
        break;
      }
      expect(res.body.users).toHaveLength(3);
      token = res.body.lastEvaluatedKey;
    }
    expect(pages).toBe(4);
    expect(seen).toEqual(expected);

    // A user updated later keeps its place: order is by creation.
    clock.advance(1000);
    await api.identify('p0', { email: 'p0@example.com' }, key);
    const all = await api.list('', key);
    expect(all.body).toEqual({ users: expect.any(Array), hasMore: false });
    expect(all.body.users.map((u: { id: string }) => u.id)).toEqual(expected);
    expect(all.body.users.at(-1)).toMatchObject({ id: 'p0', email: 'p0@example.com', properties: { i: 0 } });

    const exact = await api.list('?limit=10', key);
    expect(exact.body.hasMore).toBe(false);
    expect(exact.body.users).toHaveLength(10);
  });

  it('list rejects a bad limit or nextToken with 400', async () => {
    for (const query of ['?limit=0', '?limit=1001', '?limit=abc', '?nextToken=not*a*token', `?nextToken=${Buffer.from('{"a":1}').toString('base64url')}`]) {
      const res = await api.list(query);
      expect(res.status, query).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_FAILED');
    }
    const res = await api.list('?nextToken=garbage');
    expect(res.body.error.message).toContain('nextToken');
    expect(res.body.error.fix).toContain('lastEvaluatedKey');
  });

  it('isolates accounts: another account cannot read, update, delete, list or unsuppress our users', async () => {
    await api.identify('frank', { email: 'frank@example.com', properties: { tier: 'gold' } });
    const other = await t.newAccount();
    const theirs = bearer(other.apiKey);

    expect((await api.get('frank', theirs)).status).toBe(404);
    expect((await api.remove('frank', theirs)).status).toBe(404);
    expect((await api.unsuppress('frank', 'EMAIL', theirs)).status).toBe(404);
    expect((await api.list('', theirs)).body).toEqual({ users: [], hasMore: false });

    // Their identify of the same id creates their own user and leaves ours alone.
    const created = await api.identify('frank', { email: 'mallory@example.com', properties: { tier: 'none' } }, theirs);
    expect(created.status).toBe(200);
    expect((await api.get('frank')).body).toMatchObject({ email: 'frank@example.com', properties: { tier: 'gold' } });
    expect((await api.get('frank', theirs)).body).toMatchObject({ email: 'mallory@example.com', properties: { tier: 'none' } });

    // A JWT of the other account cannot select our environment.
    const jwt = await signAccountToken(t.deps.secrets, { accountId: other.accountId, subject: 'x' }, 3600, clock.now());
    expect((await api.get('frank', bearer(jwt))).status).toBe(400);
    const res = await t.app.inject({ method: 'GET', url: `/users/frank?envId=${t.account.clientId}`, headers: bearer(jwt) });
    expect(res.statusCode).toBe(401);
  });

  it('isolates environments of the same account', async () => {
    await api.identify('gina', { email: 'gina@example.com' });
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Second' } })).json();
    const key = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'second', environmentId: env.clientId } })).json();
    const second = bearer(key.key);

    expect((await api.get('gina', second)).status).toBe(404);
    expect((await api.list('', second)).body.users).toEqual([]);
    expect((await api.remove('gina', second)).status).toBe(404);
    await api.identify('gina', { email: 'gina2@example.com' }, second);
    expect((await api.get('gina')).body.email).toBe('gina@example.com');
    expect((await api.get('gina', second)).body.email).toBe('gina2@example.com');

    // A JWT picks the environment with envId.
    const jwt = bearer(await signAccountToken(t.deps.secrets, { accountId: t.account.accountId, subject: 'x' }, 3600, clock.now()));
    const viaJwt = await t.app.inject({ method: 'GET', url: `/users/gina?envId=${env.clientId}`, headers: jwt });
    expect(viaJwt.json().email).toBe('gina2@example.com');
  });

  it('answers 401 on every users route for missing, invalid and revoked keys', async () => {
    const created = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'temp' } })).json();
    expect((await api.get('alice', bearer(created.key))).status).toBe(200);
    await t.app.inject({ method: 'DELETE', url: `/keys/${created.id}`, headers: t.auth });

    const credentials: Record<string, string>[] = [{}, bearer('clarion_sk_not-a-real-key'), bearer(created.key), { authorization: 'Basic Zm9vOmJhcg==' }];
    for (const headers of credentials) {
      const responses = [
        await api.identify('alice', { email: 'x@example.com' }, headers),
        await api.get('alice', headers),
        await api.list('', headers),
        await api.remove('alice', headers),
        await api.unsuppress('alice', 'EMAIL', headers),
      ];
      for (const res of responses) {
        expect(res.status).toBe(401);
        expect(res.body.error.code).toBe('UNAUTHORIZED');
      }
    }
    expect((await api.get('alice')).body.email).not.toBe('x@example.com');
  });

  it('concurrent identifies of one user lose no property and create it once', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => api.identify('hank', { properties: { [`k${i}`]: i } })));
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(200));
    const props = (await api.get('hank')).body.properties;
    expect(props).toEqual(Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`k${i}`, i])));
  });
});

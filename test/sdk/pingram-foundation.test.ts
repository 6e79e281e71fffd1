import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/**
 * The official SDK against the started server over real HTTP: the wire shapes of users,
 * environments, account and health must be what its generated models read.
 */
describe.each(STORAGE_KINDS)('pingram SDK against the foundation (%s)', (kind) => {
  let t: TestContext;
  let clock: ManualClock;
  let client: Pingram;
  let baseUrl: string;

  beforeAll(async () => {
    clock = new ManualClock();
    t = await createTestContext(kind, { clock });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no TCP address');
    baseUrl = `http://127.0.0.1:${address.port}`;
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl });
  });
  afterAll(() => t?.close());

  it('health.healthCheck reads {message}', async () => {
    expect(await client.health.healthCheck()).toEqual({ message: 'OK' });
  });

  it('user.identify creates and merges, user.getUser reads the user back', async () => {
    const created = await client.user.identify('sdk-alice', {
      id: 'sdk-alice',
      email: 'alice@example.com',
      number: '(415) 555-0123',
      timezone: 'America/New_York',
      pushTokens: [{ type: 'APN' as never, token: 'apn-token-1', device: { device_id: 'iphone-1', platform: 'ios' } }],
    });
    expect(created).toMatchObject({
      id: 'sdk-alice',
      email: 'alice@example.com',
      number: '+14155550123',
      timezone: 'America/New_York',
      pushTokens: [{ type: 'APN', token: 'apn-token-1', device: { device_id: 'iphone-1', platform: 'ios' }, environment: 'undefined' }],
      createdAt: '2026-01-15T10:00:00.000Z',
      lastSeenTime: '2026-01-15T10:00:00.000Z',
    });

    clock.advance(60_000);
    // Without id in the body: the path id is used. Absent fields are preserved.
    const merged = await client.user.identify('sdk-alice', { slackChannel: '#alerts' });
    expect(merged).toMatchObject({
      id: 'sdk-alice',
      email: 'alice@example.com',
      slackChannel: '#alerts',
      createdAt: '2026-01-15T10:00:00.000Z',
      lastSeenTime: '2026-01-15T10:01:00.000Z',
      updatedAt: '2026-01-15T10:01:00.000Z',
    });

    const read = await client.user.getUser('sdk-alice');
    expect(read).toEqual(merged);
  });

  it('users.listUsers pages newest first, users.deleteUser removes', async () => {
    for (const id of ['sdk-b', 'sdk-c', 'sdk-d']) {
      clock.advance(1000);
      await client.user.identify(id, { email: `${id}@example.com` });
    }
    const first = await client.users.listUsers(2, '');
    expect(first.users.map((u) => u.id)).toEqual(['sdk-d', 'sdk-c']);
    expect(first.hasMore).toBe(true);
    expect(typeof first.lastEvaluatedKey).toBe('string');

    const second = await client.users.listUsers(2, first.lastEvaluatedKey as string);
    expect(second.users.map((u) => u.id)).toEqual(['sdk-b', 'sdk-alice']);
    expect(second.hasMore).toBe(false);
    expect(second.lastEvaluatedKey).toBeUndefined();

    expect(await client.users.deleteUser('sdk-b')).toEqual({ message: 'User deleted' });
    const after = await client.users.listUsers(10, '');
    expect(after.users.map((u) => u.id)).toEqual(['sdk-d', 'sdk-c', 'sdk-alice']);
    await expect(client.user.getUser('sdk-b')).rejects.toMatchObject({ response: { status: 404 } });
  });

  it('users.removeUserFromSuppression answers {user}', async () => {
    const res = await client.users.removeUserFromSuppression('sdk-alice', 'EMAIL');
    expect(res.user).toMatchObject({ id: 'sdk-alice', email: 'alice@example.com' });
    expect(res.user.emailSuppressionStatus).toBeUndefined();
  });

  it('environments: list, create, update', async () => {
    const before = await client.environments.listEnvironments();
    expect(before.map((e) => e.clientId)).toContain(t.account.clientId);

    const created = await client.environments.createEnvironment({ title: 'Staging' });
    expect(created).toMatchObject({ title: 'Staging', disableSending: [], secureMode: false });
    expect(created.clientSecret.length).toBeGreaterThan(20);

    const updated = await client.environments.updateEnvironment(created.clientId, { title: 'Staging 2', secureMode: true, disableSending: ['SMS' as never] });
    expect(updated).toMatchObject({ clientId: created.clientId, title: 'Staging 2', secureMode: true, disableSending: ['SMS'] });

    const after = await client.environments.listEnvironments();
    expect(after.find((e) => e.clientId === created.clientId)).toMatchObject({ title: 'Staging 2' });
  });

  it('account.getAccountDetails reads the account', async () => {
    const account = await client.account.getAccountDetails();
    expect(account).toMatchObject({ accountId: t.account.accountId, name: 'Test account' });
    expect(typeof account.organizationId).toBe('string');
    expect(typeof account.createdAt).toBe('string');
  });

  it('a wrong key is answered 401 through the SDK', async () => {
    const bad = new Pingram({ apiKey: 'clarion_sk_not-a-key', baseUrl });
    await expect(bad.user.getUser('sdk-alice')).rejects.toMatchObject({ response: { status: 401 } });
  });
});

import { CreateKeyRequestKeyTypeEnum, Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { sdkRefusal } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/**
 * Public API keys (README: Public keys) through the real pingram SDK against the started server:
 * created, listed and revoked with KeysApi; refused with the spec's Error body wherever a browser
 * has no business (sending, logs, keys, users); accepted on what a web page may call, acting for
 * a user only as the in-app client may (the user hash in secure mode).
 */
describe.each(STORAGE_KINDS)('pingram SDK: public API keys (%s)', (kind) => {
  let t: TestContext;
  let address: string;
  let admin: Pingram;
  let publicKey: string;
  let publicKeyId: string;
  let browser: Pingram;
  const feed = (query: string, key = publicKey) => fetch(`${address}/user/inapp?${query}`, { headers: { authorization: `Bearer ${key}` } });

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
    address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    admin = new Pingram({ apiKey: t.account.apiKey, baseUrl: address });
    await admin.components.createComponent({ componentId: 'footer', name: 'Footer', html: '<p>Footer</p>', internal: '{"rows":[]}' });
    const sent = await admin.send({ type: 'welcome', to: { id: 'ada' }, inapp: { title: 'Hello Ada' } });
    await admin.send({ type: 'welcome', to: { id: 'bob' }, inapp: { title: 'Hello Bob' } });
    // The in-app notification is stored by the worker.
    await eventually(async () => {
      const res = await fetch(`${address}/user/inapp?userId=ada`, { headers: t.auth });
      return ((await res.json()) as { notifications: { id: string }[] }).notifications.some((n) => n.id === sent.trackingId);
    }, 15_000, "Ada's in-app notification");
  });
  afterAll(() => t?.close());

  it('keys.createAPIKey makes a public key, listed whole with its type', async () => {
    const created = await admin.keys.createAPIKey({ keyType: CreateKeyRequestKeyTypeEnum.PUBLIC, name: 'web page' });
    expect(created).toMatchObject({ keyType: 'public', name: 'web page', environmentId: t.account.clientId });
    expect(created.key).toMatch(/^clarion_pk_[A-Za-z0-9_-]{40,}$/);
    publicKey = created.key;
    publicKeyId = created.id;
    browser = new Pingram({ apiKey: publicKey, baseUrl: address });

    const listed = (await admin.keys.listAPIKeys()).keys.find((k) => k.id === created.id);
    // Nothing to hide: a public key is listed whole, a secret one masked.
    expect(listed).toMatchObject({ keyType: 'public', key: publicKey, revoked: false, environmentId: t.account.clientId });
    const secret = (await admin.keys.listAPIKeys()).keys.find((k) => String(k.keyType) === 'secret');
    expect(secret?.key).toMatch(/^clarion_sk_.{4}\.\.\..{4}$/);
  });

  it('is refused with 403 FORBIDDEN on sending, logs, keys and users, and sends nothing', async () => {
    const refusals = [
      await sdkRefusal(browser.send({ type: 'from-browser', to: { id: 'ada' }, inapp: { title: 'Spoofed' } })),
      await sdkRefusal(browser.logs.getLogs()),
      await sdkRefusal(browser.logs.tailLogs()),
      await sdkRefusal(browser.keys.listAPIKeys()),
      await sdkRefusal(browser.keys.createAPIKey({ keyType: CreateKeyRequestKeyTypeEnum.SECRET, name: 'escalate' })),
      await sdkRefusal(browser.users.listUsers(10, '')),
      await sdkRefusal(browser.user.getUser('ada')),
    ];
    for (const { status, body } of refusals) {
      expect(status).toBe(403);
      expect(body.trackingId).toEqual(expect.any(String));
      expect(body.error).toMatchObject({ code: 'FORBIDDEN', message: expect.stringMatching(/public key/), fix: expect.stringMatching(/secret key/) });
    }
    const tail = await admin.logs.tailLogs();
    expect(tail.logs.map((l) => l.type)).not.toContain('from-browser');
    expect((await admin.keys.listAPIKeys()).keys.map((k) => k.name)).not.toContain('escalate');
  });

  it('reads what a web page may: parsed components and the account metadata', async () => {
    const components = await browser.components.listComponentsParsed();
    expect(components.map((c: { componentId: string; internal: unknown }) => [c.componentId, c.internal])).toEqual([['footer', { rows: [] }]]);
    const metadata = await browser.user.getAccountMetadata();
    expect(metadata.userAccountMetadata.environmentVapidPublicKey).toMatch(/^[A-Za-z0-9_-]{80,}$/);
  });

  it("acts for a named user's in-app feed as the clientId does, and needs the user hash in secure mode", async () => {
    const open = await feed('userId=ada');
    expect(open.status).toBe(200);
    expect(((await open.json()) as { notifications: { title: string }[] }).notifications.map((n) => n.title)).toEqual(['Hello Ada']);

    await admin.environments.updateEnvironment(t.account.clientId, { secureMode: true });
    try {
      const noHash = await feed('userId=ada');
      expect(noHash.status).toBe(401);
      expect(((await noHash.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
      const bobsHash = userHash(t.account.clientSecret, 'bob');
      expect((await feed(`userId=ada&userIdHash=${encodeURIComponent(bobsHash)}`)).status).toBe(401);
      const hashed = await feed(`userId=ada&userIdHash=${encodeURIComponent(userHash(t.account.clientSecret, 'ada'))}`);
      expect(hashed.status).toBe(200);
      expect(((await hashed.json()) as { notifications: { title: string }[] }).notifications.map((n) => n.title)).toEqual(['Hello Ada']);
      // A secret key is the server: it names any user without a hash.
      expect((await feed('userId=bob', t.account.apiKey)).status).toBe(200);
    } finally {
      await admin.environments.updateEnvironment(t.account.clientId, { secureMode: false });
    }
  });

  it('acts only in its own environment', async () => {
    const other = await admin.environments.createEnvironment({ title: 'Other' });
    const res = await fetch(`${address}/components/public?envId=${other.clientId}`, { headers: { authorization: `Bearer ${publicKey}` } });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('FORBIDDEN');
  });

  it('answers the CORS preflight of what it may call, not of the server API', async () => {
    const preflight = (path: string) =>
      fetch(`${address}${path}`, { method: 'OPTIONS', headers: { origin: 'https://shop.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' } });
    expect((await preflight('/components/public')).headers.get('access-control-allow-origin')).toBe('*');
    expect((await preflight('/users/ada/slack-channels')).headers.get('access-control-allow-origin')).toBe('*');
    expect((await preflight('/logs')).headers.get('access-control-allow-origin')).toBeNull();
  });

  it('keys.revokeAPIKey revokes it: the key is then 401', async () => {
    expect((await admin.keys.revokeAPIKey(publicKeyId)).message).toBeTruthy();
    const { status, body } = await sdkRefusal(browser.components.listComponentsParsed());
    expect([status, body.error.code, body.error.message]).toEqual([401, 'UNAUTHORIZED', 'This API key has been revoked.']);
    expect((await admin.keys.listAPIKeys()).keys.find((k) => k.id === publicKeyId)?.revoked).toBe(true);
  });
});

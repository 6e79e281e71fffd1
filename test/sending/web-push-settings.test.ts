import { createECDH } from 'node:crypto';
import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const basic = (...parts: string[]) => `Basic ${Buffer.from(parts.join(':')).toString('base64')}`;

describe.each(STORAGE_KINDS)('web push VAPID keys and where browsers read them (%s)', (kind) => {
  let t: TestContext;
  let baseUrl: string;

  beforeAll(async () => {
    t = await createTestContext(kind, { config: { webPushSubject: 'https://notify.example.com' } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    baseUrl = `http://127.0.0.1:${address.port}`;
  });
  afterAll(() => t.close());

  it('creates one key pair per environment on first read, private key sealed at rest', async () => {
    const first = await t.app.inject({ method: 'GET', url: '/settings/push/web', headers: t.auth });
    expect(first.statusCode).toBe(200);
    const { publicKey, subject } = first.json();
    expect(subject).toBe('https://notify.example.com');
    expect(Buffer.from(publicKey, 'base64url')).toHaveLength(65);
    expect((await t.app.inject({ method: 'GET', url: '/settings/push/web', headers: t.auth })).json().publicKey).toBe(publicKey);

    const row = (await t.deps.db
      .selectFrom('web_push_settings' as never)
      .selectAll()
      .where('env_id' as never, '=', t.account.clientId as never)
      .executeTakeFirstOrThrow()) as { public_key: string; private_key_enc: string };
    expect(row.public_key).toBe(publicKey);
    const privateKey = t.deps.secrets.decrypt(row.private_key_enc);
    expect(row.private_key_enc).not.toContain(privateKey);
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(Buffer.from(privateKey, 'base64url'));
    expect(ecdh.getPublicKey().toString('base64url')).toBe(publicKey);

    const other = await t.newAccount();
    const theirs = (await t.app.inject({ method: 'GET', url: '/settings/push/web', headers: { authorization: `Bearer ${other.apiKey}` } })).json();
    expect(theirs.publicKey).not.toBe(publicKey);
    expect((await t.app.inject({ method: 'GET', url: '/settings/push/web' })).statusCode).toBe(401);
  });

  it('serves the public key to the pingram SDK (UserApi.getAccountMetadata) and the in-app client path', async () => {
    const { publicKey } = (await t.app.inject({ method: 'GET', url: '/settings/push/web', headers: t.auth })).json();
    const client = new Pingram({ apiKey: 'unused-for-user-calls', baseUrl, headers: { Authorization: basic(t.account.clientId, 'browser-user') } });
    const metadata = await client.user.getAccountMetadata();
    expect(metadata.userAccountMetadata).toEqual({ logo: '', environmentVapidPublicKey: publicKey, hasWebPushEnabled: true });

    // @notificationapi/core: GET /{clientId}/users/{userId}/account_metadata with Basic clientId:userId.
    const core = await fetch(`${baseUrl}/${t.account.clientId}/users/${encodeURIComponent('browser user')}/account_metadata`, {
      headers: { Authorization: basic(t.account.clientId, 'browser user') },
    });
    expect(core.status).toBe(200);
    expect((await core.json()).userAccountMetadata.environmentVapidPublicKey).toBe(publicKey);

    const wrongClient = await t.app.inject({ method: 'GET', url: `/someone-else/users/u1/account_metadata`, headers: { authorization: basic(t.account.clientId, 'u1') } });
    expect(wrongClient.statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: '/users/account-metadata' })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: '/users/account-metadata', headers: { authorization: basic('no-such-client', 'u1') } })).statusCode).toBe(401);
    // An API key names its environment itself.
    expect((await t.app.inject({ method: 'GET', url: '/users/account-metadata', headers: t.auth })).json().userAccountMetadata.environmentVapidPublicKey).toBe(publicKey);
  });

  it('asks for the user hash in secure mode and reports web push disabled for the environment', async () => {
    await t.app.inject({ method: 'PATCH', url: `/environments/${t.account.clientId}`, headers: t.auth, payload: { secureMode: true, disableSending: ['WEB_PUSH'] } });
    try {
      const url = '/users/account-metadata';
      expect((await t.app.inject({ method: 'GET', url, headers: { authorization: basic(t.account.clientId, 'u1') } })).statusCode).toBe(401);
      const hash = userHash(t.account.clientSecret, 'u1');
      const res = await t.app.inject({ method: 'GET', url, headers: { authorization: basic(t.account.clientId, 'u1', hash) } });
      expect(res.statusCode).toBe(200);
      expect(res.json().userAccountMetadata.hasWebPushEnabled).toBe(false);
    } finally {
      await t.app.inject({ method: 'PATCH', url: `/environments/${t.account.clientId}`, headers: t.auth, payload: { secureMode: false, disableSending: [] } });
    }
  });
});

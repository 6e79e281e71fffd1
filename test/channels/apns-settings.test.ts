import { exportPKCS8, generateKeyPair } from 'jose';
import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('APNs settings: PUT/GET/DELETE /settings/push/apn (%s)', (kind) => {
  let t: TestContext;
  let pem: string;
  let client: Pingram;
  const call = (method: 'GET' | 'PUT' | 'DELETE', payload?: object, auth = t.auth) =>
    t.app.inject({ method, url: '/settings/push/apn', headers: auth, ...(payload ? { payload } : {}) });

  beforeAll(async () => {
    t = await createTestContext(kind);
    pem = await exportPKCS8((await generateKeyPair('ES256', { extractable: true })).privateKey);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no TCP address');
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl: `http://127.0.0.1:${address.port}` });
  });
  afterAll(() => t?.close());

  it('stores the key encrypted, never returns it, and removes it', async () => {
    expect((await call('GET')).json().error.code).toBe('NOT_FOUND');

    const put = await call('PUT', { KeyId: 'ABC123DEFG', Key: pem, TeamId: 'TEAM123456', Topic: 'com.example.app' });
    expect(put.statusCode).toBe(200);
    const body = (pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, ''));
    const view = { KeyId: 'ABC123DEFG', Key: `********${body.slice(-4)}`, TeamId: 'TEAM123456', Topic: 'com.example.app' };
    expect(put.json()).toEqual(view);
    expect((await call('GET')).json()).toEqual(view);

    const rows = await t.deps.db.selectFrom('apn_settings' as never).selectAll().execute();
    expect(rows).toHaveLength(1);
    const row = rows[0] as Record<string, string>;
    expect(JSON.stringify(row)).not.toContain(body.slice(0, 40));
    expect(t.deps.secrets.decrypt(row.key_enc)).toBe(pem.endsWith('\n') ? pem : `${pem}\n`);

    // Another account's environment sees nothing.
    const other = await t.newAccount();
    expect((await call('GET', undefined, { authorization: `Bearer ${other.apiKey}` })).statusCode).toBe(404);

    expect((await call('DELETE')).statusCode).toBe(200);
    expect((await call('GET')).statusCode).toBe(404);
    expect((await call('DELETE')).statusCode).toBe(404);
    expect(await t.deps.db.selectFrom('apn_settings' as never).selectAll().execute()).toHaveLength(0);
  });

  it('accepts the key with escaped newlines or as a bare base64 body', async () => {
    const escaped = await call('PUT', { KeyId: 'K1', Key: pem.replace(/\n/g, '\\n'), TeamId: 'T1', Topic: 'com.example.app' });
    expect(escaped.statusCode).toBe(200);
    const bare = pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
    const res = await call('PUT', { KeyId: 'K2', Key: bare, TeamId: 'T1', Topic: 'com.example.app' });
    expect(res.statusCode).toBe(200);
    expect(res.json().KeyId).toBe('K2');
    const row = (await t.deps.db.selectFrom('apn_settings' as never).selectAll().execute())[0] as Record<string, string>;
    expect(t.deps.secrets.decrypt(row.key_enc)).toContain('-----BEGIN PRIVATE KEY-----');
  });

  it('rejects a key that is not an ES256 PKCS#8 key, and missing fields', async () => {
    const rsa = await exportPKCS8((await generateKeyPair('RS256', { extractable: true })).privateKey);
    for (const Key of ['not a key', rsa]) {
      const res = await call('PUT', { KeyId: 'ABC123DEFG', Key, TeamId: 'TEAM123456', Topic: 'com.example.app' });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    const missing = await call('PUT', { KeyId: 'ABC123DEFG', Key: pem, TeamId: 'TEAM123456' });
    expect(missing.statusCode).toBe(400);
    expect((await call('PUT', { KeyId: 'has spaces in it', Key: pem, TeamId: 'T', Topic: 'x' })).statusCode).toBe(400);
  });

  it('works with the pingram SDK (PushSettingsApi)', async () => {
    const saved = await client.pushSettings.upsertPushApnSettings({ KeyId: 'SDKKEY1234', Key: pem, TeamId: 'SDKTEAM123', Topic: 'com.example.sdk' });
    expect(saved).toMatchObject({ KeyId: 'SDKKEY1234', TeamId: 'SDKTEAM123', Topic: 'com.example.sdk' });
    expect(saved.Key).not.toContain('PRIVATE KEY');
    expect(await client.pushSettings.getPushApnSettings()).toEqual(saved);
    await client.pushSettings.deletePushApnSettings();
    expect((await call('GET')).statusCode).toBe(404);
  });
});

import { generateKeyPairSync } from 'node:crypto';
import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FcmSettingsRepository } from '../../src/modules/push/fcm.repository.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { generateServiceAccountKeys } from '../helpers/fcm-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const keys = generateServiceAccountKeys();

function serviceAccount(projectId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: 'service_account',
    project_id: projectId,
    private_key_id: 'b1e6b0a1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7',
    private_key: keys.privateKey,
    client_email: `firebase-adminsdk-x1@${projectId}.iam.gserviceaccount.com`,
    client_id: '100000000000000000001',
    auth_uri: 'https://accounts.google.com/o/oauth2/auth',
    token_uri: 'https://oauth2.googleapis.com/token',
    universe_domain: 'googleapis.com',
    ...extra,
  };
}

describe.each(STORAGE_KINDS)('FCM settings: /settings/push/fcm (%s)', (kind) => {
  let t: TestContext;
  const put = (body: unknown, headers = t.auth) => t.app.inject({ method: 'PUT', url: '/settings/push/fcm', headers, payload: body as object });
  const get = (headers = t.auth) => t.app.inject({ method: 'GET', url: '/settings/push/fcm', headers });
  const del = (headers = t.auth) => t.app.inject({ method: 'DELETE', url: '/settings/push/fcm', headers });

  beforeAll(async () => {
    // Production-like: the SSRF guard applies to token_uri.
    t = await createTestContext(kind, { config: { allowPrivateNetworks: false } });
  });
  afterAll(() => t?.close());

  it('stores the service account with its private key encrypted, and never returns the key', async () => {
    const account = serviceAccount('clarion-demo-1');
    const res = await put({ fcmConfig: JSON.stringify(account) });
    expect(res.statusCode).toBe(200);
    expect(res.body).not.toContain('PRIVATE KEY');
    const { private_key: _k, ...publicFields } = account;
    expect(res.json()).toMatchObject({
      projectId: 'clarion-demo-1',
      clientEmail: account.client_email,
      tokenUri: 'https://oauth2.googleapis.com/token',
    });
    expect(JSON.parse(res.json().fcmConfig)).toEqual(publicFields);

    const read = await get();
    expect(read.statusCode).toBe(200);
    expect(read.body).not.toContain('PRIVATE KEY');
    expect(read.json()).toEqual(res.json());

    const row = await new FcmSettingsRepository(t.deps.db).find({ accountId: t.account.accountId, envId: t.account.clientId });
    expect(row!.private_key_enc).not.toContain('PRIVATE KEY');
    expect(row!.account_json).not.toContain('PRIVATE KEY');
    expect(t.deps.secrets.decrypt(row!.private_key_enc).trim()).toBe(keys.privateKey.trim());
  });

  it('accepts the key file as an object too, and a PUT replaces the previous one', async () => {
    const res = await put({ fcmConfig: serviceAccount('clarion-demo-2') });
    expect(res.statusCode).toBe(200);
    expect((await get()).json().projectId).toBe('clarion-demo-2');
  });

  it.each([
    ['not JSON', { fcmConfig: '{"project_id": ' }, /not valid JSON/],
    ['a JSON array', { fcmConfig: '[1,2]' }, /JSON object/],
    ['another key type', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { type: 'authorized_user' })) }, /service_account/],
    ['no private key', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { private_key: undefined })) }, /missing "private_key"/],
    ['no project or email', { fcmConfig: JSON.stringify({ private_key: keys.privateKey }) }, /missing "project_id", "client_email"/],
    ['a bad project id', { fcmConfig: JSON.stringify(serviceAccount('Bad Project/../x')) }, /project_id/],
    ['a bad client email', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { client_email: 'nobody' })) }, /client_email/],
    ['a private key that is not PEM', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { private_key: 'MIIEvQIBADANBg...' })) }, /private_key.*PEM/],
    ['an EC private key', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { private_key: ecKey() })) }, /RSA/],
    ['an http token_uri', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { token_uri: 'http://oauth2.googleapis.com/token' })) }, /https/],
    ['a token_uri that is not a URL', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { token_uri: 'token' })) }, /token_uri/],
    ['a loopback token_uri', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { token_uri: 'https://127.0.0.1:8443/token' })) }, /token_uri.*loopback/],
    ['a token_uri whose name resolves to loopback', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { token_uri: 'https://localhost/token' })) }, /token_uri.*loopback/],
    ['a metadata-service token_uri', { fcmConfig: JSON.stringify(serviceAccount('clarion-demo-3', { token_uri: 'https://169.254.169.254/token' })) }, /token_uri/],
  ])('refuses %s with 400 and a clear message, keeping the stored setting', async (_name, body, message) => {
    const res = await put(body);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('VALIDATION_FAILED');
    expect(res.json().error.message).toMatch(message);
    expect(res.json().error.fix).toBeTruthy();
    expect(res.body).not.toContain('PRIVATE KEY');
    expect((await get()).json().projectId).toBe('clarion-demo-2');
  });

  it('refuses a body without fcmConfig or with other fields (schema)', async () => {
    expect((await put({})).statusCode).toBe(400);
    expect((await put({ fcmConfig: JSON.stringify(serviceAccount('clarion-demo-4')), extra: 1 })).statusCode).toBe(400);
  });

  it('keeps accounts and environments apart', async () => {
    const other = await t.newAccount('Other');
    const otherAuth = { authorization: `Bearer ${other.apiKey}` };
    expect((await get(otherAuth)).statusCode).toBe(404);
    expect((await put({ fcmConfig: JSON.stringify(serviceAccount('other-account-1')) }, otherAuth)).statusCode).toBe(200);

    // A second environment of the first account, addressed with its clientId:clientSecret.
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Staging' } })).json();
    const envAuth = { authorization: `Basic ${Buffer.from(`${env.clientId}:${env.clientSecret}`).toString('base64')}` };
    expect((await get(envAuth)).statusCode).toBe(404);
    expect((await put({ fcmConfig: JSON.stringify(serviceAccount('staging-project')) }, envAuth)).statusCode).toBe(200);

    expect((await get()).json().projectId).toBe('clarion-demo-2');
    expect((await get(otherAuth)).json().projectId).toBe('other-account-1');
    expect((await get(envAuth)).json().projectId).toBe('staging-project');

    expect((await del(envAuth)).statusCode).toBe(200);
    expect((await get(envAuth)).statusCode).toBe(404);
    expect((await get()).json().projectId).toBe('clarion-demo-2');
    expect((await get(otherAuth)).json().projectId).toBe('other-account-1');
  });

  it('DELETE removes the setting; a second DELETE is 404', async () => {
    const res = await del();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ message: 'FCM settings removed' });
    const missing = await get();
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.code).toBe('NOT_FOUND');
    expect((await del()).statusCode).toBe(404);
  });

  it('works through the pingram SDK (PushSettingsApi) over HTTP', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no TCP address');
    const client = new Pingram({ apiKey: t.account.apiKey, baseUrl: `http://127.0.0.1:${address.port}` });
    const account = serviceAccount('sdk-project-1');

    const saved = await client.pushSettings.upsertPushFcmSettings({ fcmConfig: JSON.stringify(account) });
    expect(JSON.parse(saved.fcmConfig)).toMatchObject({ project_id: 'sdk-project-1', client_email: account.client_email });
    expect(saved.fcmConfig).not.toContain('PRIVATE KEY');
    const read = await client.pushSettings.getPushFcmSettings();
    expect(read.fcmConfig).toBe(saved.fcmConfig);
    await client.pushSettings.deletePushFcmSettings();
    expect((await get()).statusCode).toBe(404);
  });
});

function ecKey(): string {
  return generateKeyPairSync('ec', { namedCurve: 'P-256', privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } }).privateKey;
}

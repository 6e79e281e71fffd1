import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('environments (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('lists the bootstrap environment with its decrypted secret', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/environments', headers: t.auth });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual([
      { clientId: t.account.clientId, clientSecret: t.account.clientSecret, title: 'Development', disableSending: [], secureMode: false },
    ]);
  });

  it('stores the client secret encrypted, not in clear', async () => {
    const row = await t.deps.db.selectFrom('environments').selectAll().where('client_id', '=', t.account.clientId).executeTakeFirstOrThrow();
    expect(row.client_secret_enc).not.toContain(t.account.clientSecret);
    expect(row.client_secret_enc.startsWith('v1.')).toBe(true);
  });

  it('creates an environment and updates title, switches and secure mode', async () => {
    const created = await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Production' } });
    expect(created.statusCode).toBe(200);
    const env = created.json();
    expect(env).toMatchObject({ title: 'Production', disableSending: [], secureMode: false });
    expect(env.clientSecret.length).toBeGreaterThanOrEqual(40);

    const patched = await t.app.inject({
      method: 'PATCH',
      url: `/environments/${env.clientId}`,
      headers: t.auth,
      payload: { title: 'Prod', disableSending: ['SMS', 'EMAIL', 'SMS'], secureMode: true },
    });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toEqual({ ...env, title: 'Prod', disableSending: ['SMS', 'EMAIL'], secureMode: true });

    const list = (await t.app.inject({ method: 'GET', url: '/environments', headers: t.auth })).json();
    expect(list.map((e: { title: string }) => e.title)).toEqual(['Development', 'Prod']);
  });

  it('resetSecret issues a new secret and the old one stops working', async () => {
    const basic = (secret: string) => ({ authorization: `Basic ${Buffer.from(`${t.account.clientId}:${secret}`).toString('base64')}` });
    expect((await t.app.inject({ method: 'GET', url: '/account', headers: basic(t.account.clientSecret) })).statusCode).toBe(200);
    const res = await t.app.inject({ method: 'PATCH', url: `/environments/${t.account.clientId}`, headers: t.auth, payload: { resetSecret: true } });
    const fresh = res.json().clientSecret;
    expect(fresh).not.toBe(t.account.clientSecret);
    expect((await t.app.inject({ method: 'GET', url: '/account', headers: basic(t.account.clientSecret) })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: '/account', headers: basic(fresh) })).statusCode).toBe(200);
  });

  it('rejects unknown channels in disableSending with VALIDATION_FAILED', async () => {
    const res = await t.app.inject({
      method: 'PATCH',
      url: `/environments/${t.account.clientId}`,
      headers: t.auth,
      payload: { disableSending: ['FAX'] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('VALIDATION_FAILED');
    expect(typeof res.json().trackingId).toBe('string');
  });

  it('rejects a missing title', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: {} });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('VALIDATION_FAILED');
  });

  it('answers 404 for an environment of another account, and does not change it', async () => {
    const other = await t.newAccount();
    const res = await t.app.inject({ method: 'PATCH', url: `/environments/${other.clientId}`, headers: t.auth, payload: { title: 'stolen' } });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('NOT_FOUND');
    const theirs = await t.app.inject({ method: 'GET', url: '/environments', headers: { authorization: `Bearer ${other.apiKey}` } });
    expect(theirs.json()[0].title).toBe('Development');
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('API keys (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('shows a new key once, lists it masked, and it authenticates', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'ci', keyType: 'secret' } });
    expect(res.statusCode).toBe(200);
    const created = res.json();
    expect(created).toMatchObject({ name: 'ci', keyType: 'secret', environmentId: t.account.clientId });
    expect(created.key).toMatch(/^clarion_sk_[A-Za-z0-9_-]{40,}$/);

    const list = (await t.app.inject({ method: 'GET', url: '/keys', headers: t.auth })).json().keys;
    const listed = list.find((k: { id: string }) => k.id === created.id);
    expect(listed).toMatchObject({ name: 'ci', revoked: false, accountId: t.account.accountId, environmentId: t.account.clientId });
    expect(listed.key).not.toBe(created.key);
    expect(listed.key.startsWith('clarion_sk_')).toBe(true);
    expect(JSON.stringify(list)).not.toContain(created.key);

    const me = await t.app.inject({ method: 'GET', url: '/account', headers: { authorization: `Bearer ${created.key}` } });
    expect(me.statusCode).toBe(200);
    const after = (await t.app.inject({ method: 'GET', url: '/keys', headers: t.auth })).json().keys;
    expect(after.find((k: { id: string }) => k.id === created.id).lastUsedAt).toBeDefined();
  });

  it('stores only a hash of the key', async () => {
    const created = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'hashed' } })).json();
    const rows = await t.deps.db.selectFrom('api_keys').selectAll().execute();
    const secretPart = created.key.slice('clarion_sk_'.length);
    for (const row of rows) expect(JSON.stringify(row)).not.toContain(secretPart.slice(8, 30));
  });

  it('creates a key for another environment of the account, and refuses a foreign one', async () => {
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Staging' } })).json();
    const ok = await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'staging', environmentId: env.clientId } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().environmentId).toBe(env.clientId);

    const other = await t.newAccount();
    const foreign = await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'x', environmentId: other.clientId } });
    expect(foreign.statusCode).toBe(404);
  });

  it('refuses unknown key types, public keys of account scope, and missing names', async () => {
    const unknown = await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'p', keyType: 'restricted' } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error.code).toBe('VALIDATION_FAILED');
    const accountPublic = await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'p', keyType: 'public', scope: 'account' } });
    expect(accountPublic.statusCode).toBe(400);
    expect(accountPublic.json().error.message).toMatch(/public key cannot have account scope/);
    const noName = await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: {} });
    expect(noName.statusCode).toBe(400);
  });

  it('revokes, and another account can neither list nor revoke our keys', async () => {
    const other = await t.newAccount();
    const otherAuth = { authorization: `Bearer ${other.apiKey}` };
    const created = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'mine' } })).json();

    const theirList = (await t.app.inject({ method: 'GET', url: '/keys', headers: otherAuth })).json().keys;
    expect(theirList.map((k: { id: string }) => k.id)).not.toContain(created.id);
    const theirRevoke = await t.app.inject({ method: 'DELETE', url: `/keys/${created.id}`, headers: otherAuth });
    expect(theirRevoke.statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: '/account', headers: { authorization: `Bearer ${created.key}` } })).statusCode).toBe(200);

    const revoke = await t.app.inject({ method: 'DELETE', url: `/keys/${created.id}`, headers: t.auth });
    expect(revoke.statusCode).toBe(200);
    const denied = await t.app.inject({ method: 'GET', url: '/account', headers: { authorization: `Bearer ${created.key}` } });
    expect(denied.statusCode).toBe(401);
    expect(denied.json().error.message).toMatch(/revoked/);
    const listed = (await t.app.inject({ method: 'GET', url: '/keys', headers: t.auth })).json().keys;
    expect(listed.find((k: { id: string }) => k.id === created.id).revoked).toBe(true);
  });
});

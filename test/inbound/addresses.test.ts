// Inbound addresses (the pingram SDK's AddressesApi): shapes, validation errors with the spec's
// Error body, built-in addresses that cannot be deleted, custom domains refused unless verified
// for the account (test/domains covers the verified case), and isolation between environments and accounts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AddressesRepository } from '../../src/modules/addresses/addresses.repository.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('inbound addresses API (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind, { config: { inboundDomain: 'mail.clarion.test' } });
  });
  afterAll(async () => {
    await t.close();
  });
  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object, headers: Record<string, string> = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  const expectError = expectErrorBody;

  it('creates a built-in address on the mail domain, lists, renames and relabels it (SDK shapes)', async () => {
    const created = await call('POST', '/addresses', { prefix: 'Support', displayName: 'Support team' });
    expect(created.statusCode).toBe(200);
    const { address } = created.json();
    expect(address).toEqual({
      fullAddress: 'support@mail.clarion.test',
      prefix: 'support',
      domain: 'mail.clarion.test',
      type: 'builtin',
      displayName: 'Support team',
      createdAt: expect.any(String),
    });
    expect(new Date(address.createdAt).toISOString()).toBe(address.createdAt);
    // The mail domain named explicitly is the same built-in address space.
    expect((await call('POST', '/addresses', { prefix: 'billing', domain: 'MAIL.clarion.test' })).json().address).toMatchObject({ fullAddress: 'billing@mail.clarion.test', type: 'builtin' });

    const list = (await call('GET', '/addresses')).json();
    expect(list.addresses.map((a: { fullAddress: string }) => a.fullAddress)).toEqual(['support@mail.clarion.test', 'billing@mail.clarion.test']);
    expect(list.addresses[1]).not.toHaveProperty('displayName');

    const renamed = await call('PATCH', '/addresses', { fullAddress: 'Support@mail.clarion.test', prefix: 'help', displayName: 'Help desk' });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json().address).toEqual({ ...address, fullAddress: 'help@mail.clarion.test', prefix: 'help', displayName: 'Help desk' });
    expect((await call('GET', '/addresses')).json().addresses.map((a: { fullAddress: string }) => a.fullAddress)).toEqual(['help@mail.clarion.test', 'billing@mail.clarion.test']);
  });

  it('refuses invalid input with the Error body', async () => {
    expectError(await call('POST', '/addresses', {}), 400, 'VALIDATION_FAILED', /prefix/);
    expectError(await call('POST', '/addresses', { prefix: 'a b' }), 400, 'VALIDATION_FAILED', /prefix "a b" is not a valid address prefix/);
    expectError(await call('POST', '/addresses', { prefix: '.dot' }), 400, 'VALIDATION_FAILED', /not a valid address prefix/);
    expectError(await call('POST', '/addresses', { prefix: 'x', extra: 1 }), 400, 'VALIDATION_FAILED', /additional properties/);
    expectError(await call('POST', '/addresses', { prefix: 'x', domain: 'not a domain' }), 400, 'VALIDATION_FAILED', /is not a domain name/);
    const custom = expectError(await call('POST', '/addresses', { prefix: 'x', domain: 'example.com', displayName: 'X' }), 400, 'VALIDATION_FAILED', /domain "example.com" is not verified for this account: custom addresses need a verified sender domain/);
    expect(custom.error.fix).toMatch(/POST \/domains \{"sender": "example.com"\}.*built-in address \(x@mail\.clarion\.test\)/);
    expectError(await call('PATCH', '/addresses', { prefix: 'y' }), 400, 'VALIDATION_FAILED', /fullAddress/);
    expectError(await call('PATCH', '/addresses', { fullAddress: 'nobody@mail.clarion.test', prefix: 'y' }), 404, 'NOT_FOUND', /nobody@mail\.clarion\.test/);
    await call('POST', '/addresses', { prefix: 'taken' });
    expectError(await call('POST', '/addresses', { prefix: 'TAKEN' }), 409, 'CONFLICT', /taken@mail\.clarion\.test is already taken/);
    await call('POST', '/addresses', { prefix: 'other' });
    expectError(await call('PATCH', '/addresses', { fullAddress: 'other@mail.clarion.test', prefix: 'taken' }), 409, 'CONFLICT', /already taken/);
  });

  it('refuses to delete a built-in address and deletes a custom one', async () => {
    await call('POST', '/addresses', { prefix: 'keep' });
    const refused = expectError(await call('DELETE', '/addresses/keep@mail.clarion.test'), 400, 'VALIDATION_FAILED', /built-in address; built-in addresses cannot be deleted/);
    expect(refused.error.fix).toBeTruthy();
    expect((await call('GET', '/addresses')).json().addresses.some((a: { fullAddress: string }) => a.fullAddress === 'keep@mail.clarion.test')).toBe(true);

    // A custom address, as one made on a verified domain would be stored (no domain can be verified yet).
    const now = new Date().toISOString();
    await new AddressesRepository(t.deps.db).insert({
      full_address: 'hello@brand.example',
      account_id: t.account.accountId,
      env_id: t.account.clientId,
      prefix: 'hello',
      domain: 'brand.example',
      type: 'custom',
      display_name: 'Brand',
      created_at: now,
      updated_at: now,
    });
    expect((await call('GET', '/addresses')).json().addresses).toContainEqual({ fullAddress: 'hello@brand.example', prefix: 'hello', domain: 'brand.example', type: 'custom', displayName: 'Brand', createdAt: now });
    const deleted = await call('DELETE', `/addresses/${encodeURIComponent('hello@brand.example')}`);
    expect(deleted.statusCode).toBe(200);
    expect(deleted.body).toBe('');
    expectError(await call('DELETE', '/addresses/hello@brand.example'), 404, 'NOT_FOUND', /hello@brand\.example/);
  });

  it('keeps addresses inside their environment: other environments and accounts never see them', async () => {
    await call('POST', '/addresses', { prefix: 'private' });
    const other = await t.newAccount();
    const otherAuth = { authorization: `Bearer ${other.apiKey}` };
    expect((await call('GET', '/addresses', undefined, otherAuth)).json()).toEqual({ addresses: [] });
    expectError(await call('PATCH', '/addresses', { fullAddress: 'private@mail.clarion.test', displayName: 'Mine' }, otherAuth), 404, 'NOT_FOUND', /private@/);
    expectError(await call('DELETE', '/addresses/private@mail.clarion.test', undefined, otherAuth), 404, 'NOT_FOUND', /private@/);
    // The address space is shared (one mail domain): another account cannot take the same prefix.
    expectError(await call('POST', '/addresses', { prefix: 'private' }, otherAuth), 409, 'CONFLICT', /already taken/);

    const env = (await call('POST', '/environments', { title: 'Production' })).json();
    expect((await call('GET', `/addresses?envId=${env.clientId}`)).json()).toEqual({ addresses: [] });
    expectError(await call('PATCH', `/addresses?envId=${env.clientId}`, { fullAddress: 'private@mail.clarion.test', prefix: 'stolen' }), 404, 'NOT_FOUND', /private@/);
    // Still there, unchanged, for its owner.
    expect((await call('GET', '/addresses')).json().addresses.some((a: { fullAddress: string }) => a.fullAddress === 'private@mail.clarion.test')).toBe(true);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('account (%s)', (kind) => {
  let t: TestContext;
  const clock = new ManualClock(new Date('2026-03-07T08:00:00.000Z'));
  beforeAll(async () => {
    t = await createTestContext(kind, { clock, config: { defaultMessagesCap: 5000 } });
  });
  afterAll(() => t.close());

  it('returns the Account record of the caller', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/account', headers: t.auth });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      accountId: t.account.accountId,
      organizationId: t.account.accountId,
      accountType: 'free',
      name: 'Test account',
      messagesCap: 5000,
      costCap: 0,
      billingVersion: 3,
      anniversaryDate: '2026-03-07',
      createdAt: '2026-03-07T08:00:00.000Z',
      updatedAt: '2026-03-07T08:00:00.000Z',
      status: 'verified',
      subscriptionStatus: null,
      autoUpgrade: false,
    });
  });

  it('updates autoUpgrade with PATCH and with POST (the SDK uses POST)', async () => {
    clock.advance(1000);
    const patched = await t.app.inject({ method: 'PATCH', url: '/account', headers: t.auth, payload: { autoUpgrade: true } });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ autoUpgrade: true, updatedAt: '2026-03-07T08:00:01.000Z' });
    const posted = await t.app.inject({ method: 'POST', url: '/account', headers: t.auth, payload: { autoUpgrade: false } });
    expect(posted.json().autoUpgrade).toBe(false);
    expect((await t.app.inject({ method: 'GET', url: '/account', headers: t.auth })).json().autoUpgrade).toBe(false);
  });

  it('refuses unknown or mistyped fields', async () => {
    const res = await t.app.inject({ method: 'PATCH', url: '/account', headers: t.auth, payload: { autoUpgrade: 'yes please' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('VALIDATION_FAILED');
    const extra = await t.app.inject({ method: 'PATCH', url: '/account', headers: t.auth, payload: { messagesCap: 10 ** 9 } });
    expect(extra.statusCode).toBe(400);
  });

  it('shows each account only its own record', async () => {
    const other = await t.newAccount('Other');
    const theirs = (await t.app.inject({ method: 'GET', url: '/account', headers: { authorization: `Bearer ${other.apiKey}` } })).json();
    expect(theirs.accountId).toBe(other.accountId);
    expect(theirs.name).toBe('Other');
    await t.app.inject({ method: 'PATCH', url: '/account', headers: { authorization: `Bearer ${other.apiKey}` }, payload: { autoUpgrade: true } });
    expect((await t.app.inject({ method: 'GET', url: '/account', headers: t.auth })).json().autoUpgrade).toBe(false);
  });
});

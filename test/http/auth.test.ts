import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { signAccountToken } from '../../src/modules/auth/jwt.js';
import { Secrets } from '../../src/secrets.js';
import { randomBytes } from 'node:crypto';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

type Route = { method: string; url: string };

/** Every documented route that acts on an account, from the generated OpenAPI document. */
async function accountRoutes(t: TestContext): Promise<Route[]> {
  const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
  const routes: Route[] = [];
  for (const [path, methods] of Object.entries<Record<string, { security?: unknown[] }>>(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      // Public routes declare `security: []`.
      if (Array.isArray(op.security) && op.security.length === 0) continue;
      routes.push({ method: method.toUpperCase(), url: path.replace(/\{[^}]+\}/g, 'some-id') });
    }
  }
  return routes;
}

describe.each(STORAGE_KINDS)('authentication (%s)', (kind) => {
  let t: TestContext;
  const clock = new ManualClock(new Date());
  beforeAll(async () => {
    t = await createTestContext(kind, { clock });
  });
  afterAll(() => t.close());

  const expect401 = (res: LightMyRequestResponse) => {
    expect(res.statusCode).toBe(401);
    const body = res.json();
    expect(body.error.code).toBe('UNAUTHORIZED');
    expect(typeof body.error.message).toBe('string');
    expect(typeof body.trackingId).toBe('string');
  };

  it('answers 401 with the Error body on every account route without credentials', async () => {
    const routes = await accountRoutes(t);
    expect(routes.length).toBeGreaterThanOrEqual(8);
    for (const route of routes) {
      const res = await t.app.inject({ method: route.method as 'GET', url: route.url, payload: ['GET', 'DELETE'].includes(route.method) ? undefined : {} });
      expect(res.statusCode, `${route.method} ${route.url}`).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHORIZED');
    }
  });

  it('answers 401 on every account route with a revoked key', async () => {
    const created = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'to revoke' } })).json();
    const del = await t.app.inject({ method: 'DELETE', url: `/keys/${created.id}`, headers: t.auth });
    expect(del.statusCode).toBe(200);
    for (const route of await accountRoutes(t)) {
      const res = await t.app.inject({
        method: route.method as 'GET',
        url: route.url,
        headers: { authorization: `Bearer ${created.key}` },
        payload: ['GET', 'DELETE'].includes(route.method) ? undefined : {},
      });
      expect(res.statusCode, `${route.method} ${route.url}`).toBe(401);
    }
  });

  it('rejects malformed and unknown credentials', async () => {
    const cases = [
      'Bearer',
      'Bearer ',
      'Token abc',
      'Bearer clarion_sk_notakey',
      'Bearer not.a.jwt',
      `Basic ${Buffer.from('no-colon').toString('base64')}`,
      `Basic ${Buffer.from(`${t.account.clientId}:wrong`).toString('base64')}`,
      `Basic ${Buffer.from(`unknown:${t.account.clientSecret}`).toString('base64')}`,
      'Basic %%%',
      `Basic ${Buffer.from('a\0b:x').toString('base64')}`,
      `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}\0`).toString('base64')}`,
    ];
    for (const authorization of cases) {
      const res = await t.app.inject({ method: 'GET', url: '/account', headers: { authorization } });
      expect(res.statusCode, authorization).toBe(401);
      expect(res.json().error.code).toBe('UNAUTHORIZED');
    }
    // An end user's credentials with a NUL: refused on the in-app routes, on both engines alike.
    for (const credentials of [`${t.account.clientId}:a\0b`, `${t.account.clientId}\0:ada`]) {
      const authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
      for (const method of ['GET', 'PATCH'] as const) {
        const res = await t.app.inject({ method, url: '/user/inapp/unread', headers: { authorization }, ...(method === 'PATCH' ? { payload: {} } : {}) });
        expect(res.statusCode, `${method} ${JSON.stringify(credentials)}`).toBe(401);
        expect(res.json().error.code).toBe('UNAUTHORIZED');
      }
    }
  });

  it('accepts the environment client credentials as Basic', async () => {
    const authorization = `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}`).toString('base64')}`;
    const res = await t.app.inject({ method: 'GET', url: '/account', headers: { authorization } });
    expect(res.statusCode).toBe(200);
    expect(res.json().accountId).toBe(t.account.accountId);
  });

  describe('JWT', () => {
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

    it('acts on the account and needs envId for environment operations', async () => {
      const token = await signAccountToken(t.deps.secrets, { accountId: t.account.accountId, subject: 'ops' }, 600, clock.now());
      const account = await t.app.inject({ method: 'GET', url: '/account', headers: bearer(token) });
      expect(account.statusCode).toBe(200);
      expect(account.json().accountId).toBe(t.account.accountId);

      const noEnv = await t.app.inject({ method: 'GET', url: '/users', headers: bearer(token) });
      expect(noEnv.statusCode).toBe(400);
      expect(noEnv.json().error.code).toBe('ENVIRONMENT_REQUIRED');
      expect(noEnv.json().error.fix).toContain('envId');

      const withEnv = await t.app.inject({ method: 'POST', url: `/keys?envId=${t.account.clientId}`, headers: bearer(token), payload: { name: 'k' } });
      expect(withEnv.statusCode).toBe(200);
      expect(withEnv.json().environmentId).toBe(t.account.clientId);
      // Named twice: refused as such, not as no environment at all.
      for (const second of [t.account.clientId, 'other']) {
        const twice = await t.app.inject({ method: 'GET', url: `/users?envId=${t.account.clientId}&envId=${second}`, headers: bearer(token) });
        expect([twice.statusCode, twice.json().error.code, twice.json().error.message]).toEqual([400, 'VALIDATION_FAILED', 'envId is given more than once.']);
      }
    });

    it('refuses a token without an expiry, and one whose account no longer exists', async () => {
      const { SignJWT } = await import('jose');
      const iat = Math.floor(clock.now().getTime() / 1000);
      const noExp = await new SignJWT({ acc: t.account.accountId })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject('ops')
        .setIssuer('clarion')
        .setAudience('clarion-api')
        .setIssuedAt(iat)
        .sign(t.deps.secrets.jwtKey);
      expect401(await t.app.inject({ method: 'GET', url: '/account', headers: bearer(noExp) }));

      const ghost = await signAccountToken(t.deps.secrets, { accountId: 'acc_that_never_existed', subject: 'ops' }, 600, clock.now());
      expect401(await t.app.inject({ method: 'GET', url: '/account', headers: bearer(ghost) }));
      expect401(await t.app.inject({ method: 'GET', url: `/users?envId=${t.account.clientId}`, headers: bearer(ghost) }));
    });

    it('refuses an envId of another account', async () => {
      const other = await t.newAccount();
      const token = await signAccountToken(t.deps.secrets, { accountId: t.account.accountId, subject: 'ops' }, 600, clock.now());
      expect401(await t.app.inject({ method: 'GET', url: `/keys?envId=${other.clientId}`, headers: bearer(token) }));
    });

    it('refuses expired, tampered and foreign-signed tokens', async () => {
      const token = await signAccountToken(t.deps.secrets, { accountId: t.account.accountId, subject: 'ops' }, 60, clock.now());
      const [h, p, s] = token.split('.');
      const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
      const tampered = [h, Buffer.from(JSON.stringify({ ...claims, acc: 'someone-else' })).toString('base64url'), s].join('.');
      expect401(await t.app.inject({ method: 'GET', url: '/account', headers: bearer(tampered) }));

      const foreign = await signAccountToken(new Secrets(randomBytes(32)), { accountId: t.account.accountId, subject: 'x' }, 600, clock.now());
      expect401(await t.app.inject({ method: 'GET', url: '/account', headers: bearer(foreign) }));

      // Issued a year ahead (a forged clock, or a key used elsewhere): refused; a minute of skew is not.
      const ahead = await signAccountToken(t.deps.secrets, { accountId: t.account.accountId, subject: 'ops' }, 600, new Date(clock.now().getTime() + 365 * 86_400_000));
      expect401(await t.app.inject({ method: 'GET', url: '/account', headers: bearer(ahead) }));
      const skewed = await signAccountToken(t.deps.secrets, { accountId: t.account.accountId, subject: 'ops' }, 600, new Date(clock.now().getTime() + 50_000));
      expect((await t.app.inject({ method: 'GET', url: '/account', headers: bearer(skewed) })).statusCode).toBe(200);

      expect((await t.app.inject({ method: 'GET', url: '/account', headers: bearer(token) })).statusCode).toBe(200);
      clock.advance(61_000);
      expect401(await t.app.inject({ method: 'GET', url: '/account', headers: bearer(token) }));
    });
  });

  it('refuses a key at once after its revocation, though a request just used it', async () => {
    const created = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'used, then revoked' } })).json();
    const headers = { authorization: `Bearer ${created.key}` };
    expect((await t.app.inject({ method: 'GET', url: '/account', headers })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/account', headers: { authorization: `bearer  ${created.key}` } })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'DELETE', url: `/keys/${created.id}`, headers: t.auth })).statusCode).toBe(200);
    expect401(await t.app.inject({ method: 'GET', url: '/account', headers }));
  });

  it('lets an environment-scope key act only in its own environment, and an account-scope key in any of the account', async () => {
    const second = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Second' } })).json();
    const envKey = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'env only' } })).json();
    expect(envKey.scope).toBe('environment');
    const asEnvKey = { authorization: `Bearer ${envKey.key}` };
    const refused = await t.app.inject({ method: 'GET', url: `/users?envId=${second.clientId}`, headers: asEnvKey });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('FORBIDDEN');
    expect((await t.app.inject({ method: 'GET', url: `/users?envId=${t.account.clientId}`, headers: asEnvKey })).statusCode).toBe(200);

    // The bootstrap key is account scope: it acts in the second environment when asked to.
    await t.app.inject({ method: 'POST', url: `/users/in-second?envId=${second.clientId}`, headers: t.auth, payload: { id: 'in-second' } });
    const inSecond = await t.app.inject({ method: 'GET', url: `/users?envId=${second.clientId}`, headers: t.auth });
    expect(inSecond.json().users.map((u: { id: string }) => u.id)).toEqual(['in-second']);
    const inFirst = await t.app.inject({ method: 'GET', url: '/users', headers: t.auth });
    expect(inFirst.json().users.map((u: { id: string }) => u.id)).not.toContain('in-second');
  });
});

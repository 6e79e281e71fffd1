// CORS on the routes a browser calls (the in-app client's /{clientId}/users/{userId}/...), for the
// configured origins; never on the server API, whose credentials must not live in a browser.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { type TestContext, createTestContext } from '../helpers/context.js';

const basic = (clientId: string, userId: string) => ({ authorization: `Basic ${Buffer.from(`${clientId}:${userId}`).toString('base64')}` });
const preflight = (url: string, origin: string, method = 'GET') => ({
  method: 'OPTIONS' as const,
  url,
  headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization,content-type' },
});

describe('CORS, default: any origin on the in-app routes', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext('sqlite');
  });
  afterAll(() => t.close());
  const feed = () => `/${t.account.clientId}/users/ada/notifications/INAPP_WEB`;

  it('answers a preflight of the in-app client without credentials, then the call itself', async () => {
    const pre = await t.app.inject(preflight(feed(), 'https://shop.example'));
    expect(pre.statusCode).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe('*');
    expect(String(pre.headers['access-control-allow-methods'])).toContain('PATCH');
    expect(String(pre.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
    expect(pre.headers['access-control-max-age']).toBe('600');

    const get = await t.app.inject({ method: 'GET', url: feed(), headers: { origin: 'https://shop.example', ...basic(t.account.clientId, 'ada') } });
    expect(get.statusCode).toBe(200);
    expect(get.headers['access-control-allow-origin']).toBe('*');
    // The preferences route of the same client too.
    const prefs = await t.app.inject(preflight(`/${t.account.clientId}/users/ada/preferences`, 'https://shop.example', 'POST'));
    expect(prefs.headers['access-control-allow-origin']).toBe('*');
    // The user's own record at its documented path, without a trailing slash (identify, user.get).
    const user = await t.app.inject(preflight(`/${t.account.clientId}/users/ada`, 'https://shop.example', 'POST'));
    expect(user.statusCode).toBe(204);
    expect(user.headers['access-control-allow-origin']).toBe('*');
    const read = await t.app.inject({ method: 'GET', url: `/${t.account.clientId}/users/ada`, headers: { origin: 'https://shop.example', ...basic(t.account.clientId, 'ada') } });
    expect(read.headers['access-control-allow-origin']).toBe('*');
    // An OPTIONS that is not a whole preflight is never a bare text/plain 400.
    for (const headers of [{}, { origin: 'https://shop.example' }]) {
      const bare = await t.app.inject({ method: 'OPTIONS', url: '/user/inapp', headers });
      expect(bare.statusCode, JSON.stringify(headers)).toBe(204);
    }
  });

  it('gives the server API no CORS headers, preflight or not', async () => {
    const pre = await t.app.inject(preflight('/send', 'https://shop.example', 'POST'));
    expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    const send = await t.app.inject({ method: 'POST', url: '/send', headers: { ...t.auth, origin: 'https://shop.example' }, payload: { type: 't', to: { id: 'ada' }, inapp: { title: 'x' } } });
    expect(send.statusCode).toBeLessThan(300);
    expect(send.headers['access-control-allow-origin']).toBeUndefined();
    const users = await t.app.inject({ method: 'GET', url: '/users', headers: { ...t.auth, origin: 'https://shop.example' } });
    expect(users.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('CORS with CLARION_CORS_ORIGINS', () => {
  it('reflects a listed origin only, and sends nothing when off', async () => {
    const listed = await createTestContext('sqlite', { config: { corsOrigins: ['https://shop.example', 'http://localhost:5173'] } });
    try {
      const url = `/${listed.account.clientId}/users/ada/notifications/INAPP_WEB`;
      const ok = await listed.app.inject(preflight(url, 'http://localhost:5173'));
      expect(ok.headers['access-control-allow-origin']).toBe('http://localhost:5173');
      expect(String(ok.headers.vary)).toMatch(/origin/i);
      const other = await listed.app.inject(preflight(url, 'https://evil.example'));
      expect(other.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await listed.close();
    }
    const off = await createTestContext('sqlite', { config: { corsOrigins: 'off' } });
    try {
      const res = await off.app.inject(preflight(`/${off.account.clientId}/users/ada/notifications/INAPP_WEB`, 'https://shop.example'));
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await off.close();
    }
  });

  it('reads *, off and lists of origins, and refuses anything else naming the variable', () => {
    expect(loadConfig({}).corsOrigins).toBe('*');
    expect(loadConfig({ CLARION_CORS_ORIGINS: 'OFF' }).corsOrigins).toBe('off');
    expect(loadConfig({ CLARION_CORS_ORIGINS: 'https://a.example, http://localhost:5173' }).corsOrigins).toEqual(['https://a.example', 'http://localhost:5173']);
    for (const bad of ['https://a.example/path', 'a.example', 'https://a.example,ftp://b.example']) {
      expect(() => loadConfig({ CLARION_CORS_ORIGINS: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ CLARION_CORS_ORIGINS: bad })).toThrow(/^CLARION_CORS_ORIGINS must be \*, off, or a comma-separated list of origins/);
    }
  });
});

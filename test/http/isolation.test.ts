import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/**
 * Every documented route, called with another account's key and this account's ids, neither
 * shows this account's data nor changes it.
 */
describe.each(STORAGE_KINDS)('cross-account isolation on every route (%s)', (kind) => {
  let t: TestContext;
  const ids: Record<string, string> = {};
  const markers: string[] = [];

  const as = (authorization: string) => (method: string, url: string, payload?: unknown) =>
    t.app.inject({ method: method as 'GET', url, headers: { authorization }, ...(payload === undefined ? {} : { payload: payload as object }) });

  /** What account A can see of itself; must be the same before and after B's calls. */
  async function snapshot(): Promise<string> {
    const a = as(t.auth.authorization);
    const urls = [
      '/account',
      '/environments',
      '/users',
      '/users/victim',
      '/types',
      '/types/a-type',
      '/components',
      '/components/a-comp',
      '/notifications/a-type/EMAIL/templates',
      `/logs/${ids.trackingId},${ids.scheduledId}`,
      '/settings/slack',
      '/settings/push/web',
      '/numbers/list',
      '/outbox',
      `/user/inapp?userId=victim`,
    ];
    const bodies = [];
    for (const url of urls) {
      const res = await a('GET', url);
      bodies.push([url, res.statusCode, res.json()]);
    }
    const keys = (await a('GET', '/keys')).json().keys.map(({ lastUsedAt: _omit, ...k }: Record<string, unknown>) => k);
    return JSON.stringify([bodies, keys]);
  }

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
    const a = as(t.auth.authorization);
    const ok = async (p: Promise<{ statusCode: number; json(): any }>) => {
      const res = await p;
      expect(res.statusCode, JSON.stringify(res.json())).toBeLessThan(300);
      return res.json();
    };
    markers.push(t.account.clientSecret, t.account.apiKey, 'victim-a@example.com', 'A-MARKER');
    await ok(a('POST', '/users/victim', { id: 'victim', email: 'victim-a@example.com', properties: { note: 'A-MARKER-user' } }));
    ids.keyId = (await ok(a('POST', '/keys', { name: 'A-MARKER-key' }))).id;
    await ok(a('POST', '/types', { notificationId: 'a-type', title: 'A-MARKER-type', channels: ['EMAIL', 'INAPP_WEB'] }));
    await ok(a('POST', '/components', { componentId: 'a-comp', name: 'A-MARKER-comp', html: '<b>A-MARKER-comp</b>' }));
    await ok(a('POST', '/notifications/a-type/EMAIL/templates', { templateId: 'a-tpl', subject: 'A-MARKER-subject', html: '<p>x</p>' }));
    await ok(a('PUT', '/settings/slack', { botToken: 'xoxb-A-MARKER-token' }));
    ids.trackingId = (await ok(a('POST', '/send', { type: 'a-type', to: { id: 'victim' }, email: { subject: 'A-MARKER-mail', html: '<p>A-MARKER</p>' }, inapp: { title: 'A-MARKER-inapp' } }))).trackingId;
    ids.scheduledId = (await ok(a('POST', '/send', { type: 'a-type', to: { id: 'victim' }, inapp: { title: 'A-MARKER-later' }, schedule: new Date(Date.now() + 86_400_000).toISOString() }))).trackingId;
    ids.outboxId = await eventually(async () => (await a('GET', '/outbox')).json().messages?.[0]?.id, 15_000, 'outbox entry');
    ids.queryId = (await ok(a('POST', '/logs/query', {}))).queryId;
  });
  afterAll(() => t.close());

  it('answers another account without any of this account data, and changes nothing', async () => {
    const before = await snapshot();
    const other = await t.newAccount('Intruder');
    const b = as(`Bearer ${other.apiKey}`);
    const params: Record<string, string> = {
      clientId: t.account.clientId,
      keyId: ids.keyId,
      userId: 'victim',
      channel: 'EMAIL',
      id: ids.outboxId,
      notificationId: 'a-type',
      componentId: 'a-comp',
      templateId: 'a-tpl',
      trackingId: ids.scheduledId,
      trackingIds: `${ids.trackingId},${ids.scheduledId}`,
      queryId: ids.queryId,
      accountSid: 'AC00000000000000000000000000000000',
      resource: 'SM00000000000000000000000000000000.json',
    };
    const bodies: Record<string, unknown> = {
      'PATCH /environments/{clientId}': { title: 'pwned', secureMode: true, resetSecret: true },
      'POST /users/{userId}': { id: 'victim', email: 'pwned@example.com' },
      'PATCH /types/{notificationId}': { title: 'pwned', enabled: false },
      'PATCH /components/{componentId}': { html: 'pwned' },
      'PATCH /notifications/{notificationId}/{channel}/templates/{templateId}': { subject: 'pwned' },
      'PATCH /notifications/{notificationId}/{channel}/templates/default-selection': { templateId: 'a-tpl' },
      'PUT /sender/scheduler/{trackingId}': { type: 'a-type', to: { id: 'victim' }, inapp: { title: 'pwned' }, schedule: new Date(Date.now() - 1000).toISOString() },
      'POST /{clientId}/sender': { type: 'a-type', to: { id: 'victim' }, inapp: { title: 'pwned' } },
      'POST /logs/bulk': { trackingIds: [ids.trackingId, ids.scheduledId] },
      'POST /logs/query': { envIdFilter: [t.account.clientId] },
      'PATCH /user/inapp': { trackingIds: [ids.trackingId], archived: true },
    };
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    let calls = 0;
    for (const [path, methods] of Object.entries<Record<string, { security?: unknown[] }>>(doc.paths)) {
      for (const [lower, op] of Object.entries(methods)) {
        if (Array.isArray(op.security) && op.security.length === 0) continue; // public: status, provider callbacks
        const method = lower.toUpperCase();
        let url = path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(params[name] ?? 'x'));
        if (path.startsWith('/user/') || path.includes('/users/{userId}/')) url += `${url.includes('?') ? '&' : '?'}userId=victim`;
        const payload = method === 'GET' || method === 'DELETE' ? undefined : (bodies[`${method} ${path}`] ?? {});
        const res = await b(method, url, payload);
        calls++;
        for (const marker of markers) expect(res.body, `${method} ${path} leaked ${marker.slice(0, 12)}`).not.toContain(marker);
      }
    }
    expect(calls).toBeGreaterThan(50);
    expect(await snapshot()).toBe(before);
  });
});

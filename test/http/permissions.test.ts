import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { signAccountToken } from '../../src/modules/auth/jwt.js';
import { PERMISSIONS, type Permission } from '../../src/http/permissions.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/**
 * The permission matrix (README: Authentication), walked over every operation of /openapi.json
 * with every kind of identity. Account A has environments E1 (where the data lives) and E2;
 * account B is a stranger (so this is also the cross-account isolation test). An operation the
 * matrix does not list fails the test.
 */

type Outcome =
  /** Passes authentication and the permission check (any other answer: 4xx of the input, 2xx). */
  | 'allowed'
  | 'forbidden'
  | 'unauthorized'
  | 'environment-required'
  /** 401 or 403: a stranger's credentials naming E1. */
  | 'refused'
  /** Acts somewhere else (its own environment or account): checked only for leaks and changes. */
  | 'elsewhere';

interface Identity {
  name: string;
  authorization: string;
  /** The ?envId= the identity asks for (E1 unless undefined). */
  envId?: string;
  /** Whether it is entitled to E1's data (its answers are not checked for E1's markers). */
  entitled: boolean;
  expect(permission: Permission): Outcome;
}

const SERVER_PERMISSIONS: Permission[] = ['browser', 'environment', 'account-read', 'account'];
/** Permissions that act inside one environment (a JWT must name it). */
const IN_ENVIRONMENT = (p: Permission) => p === 'environment' || p === 'browser';

describe.each(STORAGE_KINDS)('permission matrix on every operation (%s)', (kind) => {
  let t: TestContext;
  let identities: Identity[];
  const ids: Record<string, string> = {};
  const markers: string[] = [];

  const call = (authorization: string, method: string, url: string, payload?: unknown) =>
    t.app.inject({ method: method as 'GET', url, headers: { authorization }, ...(payload === undefined ? {} : { payload: payload as object }) });

  /** What account A's account key sees of E1 and of the account; must not change under the calls that are refused. */
  async function snapshot(): Promise<string> {
    const urls = [
      '/account',
      '/environments',
      '/keys',
      '/users',
      '/users/victim',
      '/types',
      '/components',
      '/notifications/a-type/EMAIL/templates',
      `/logs/${ids.trackingId},${ids.scheduledId}`,
      '/settings/slack',
      '/outbox',
      '/user/inapp?userId=victim',
    ];
    const seen = [];
    for (const url of urls) {
      const res = await call(`Bearer ${t.account.apiKey}`, 'GET', url);
      // lastUsedAt moves with every use of a key.
      seen.push([url, res.statusCode, res.body.replace(/,?"lastUsedAt":"[^"]*"/g, '')]);
    }
    return JSON.stringify(seen);
  }

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
    // The development carrier posts its inbound webhook to Clarion over real HTTP.
    t.deps.config.publicUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const acct = `Bearer ${t.account.apiKey}`;
    const ok = async (p: Promise<LightMyRequestResponse>) => {
      const res = await p;
      expect(res.statusCode, JSON.stringify(res.json())).toBeLessThan(300);
      return res.json();
    };
    const e1 = t.account.clientId;
    const e2 = await ok(call(acct, 'POST', '/environments', { title: 'Second' }));
    const k1 = await ok(call(acct, 'POST', '/keys', { name: 'E1 only', environmentId: e1 }));
    const k2 = await ok(call(acct, 'POST', '/keys', { name: 'E2 only', environmentId: e2.clientId }));
    expect([k1.scope, k2.scope]).toEqual(['environment', 'environment']);
    const p1 = await ok(call(acct, 'POST', '/keys', { name: 'E1 web page', keyType: 'public', environmentId: e1 }));
    const p2 = await ok(call(acct, 'POST', '/keys', { name: 'E2 web page', keyType: 'public', environmentId: e2.clientId }));
    const b = await t.newAccount('Stranger');
    const basic = (clientId: string, secret: string) => `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`;
    const jwt = async (accountId: string) => `Bearer ${await signAccountToken(t.deps.secrets, { accountId, subject: 'ops' }, 3600, t.deps.clock.now())}`;

    markers.push(t.account.clientSecret, t.account.apiKey, k1.key, 'victim-a@example.com', 'A-MARKER');
    // The victim's number: a STOP simulated by another environment must not suppress it (snapshot).
    await ok(call(acct, 'POST', '/users/victim', { id: 'victim', email: 'victim-a@example.com', number: '+15005550006', properties: { note: 'A-MARKER-user' } }));
    ids.keyId = k1.id;
    await ok(call(acct, 'POST', '/types', { notificationId: 'a-type', title: 'A-MARKER-type', channels: ['EMAIL', 'INAPP_WEB'] }));
    await ok(call(acct, 'POST', '/components', { componentId: 'a-comp', name: 'A-MARKER-comp', html: '<b>A-MARKER-comp</b>' }));
    await ok(call(acct, 'POST', '/notifications/a-type/EMAIL/templates', { templateId: 'a-tpl', subject: 'A-MARKER-subject', html: '<p>x</p>' }));
    await ok(call(acct, 'PUT', '/settings/slack', { botToken: 'xoxb-A-MARKER-token' }));
    ids.trackingId = (await ok(call(acct, 'POST', '/send', { type: 'a-type', to: { id: 'victim' }, email: { subject: 'A-MARKER-mail', html: '<p>A-MARKER</p>' }, inapp: { title: 'A-MARKER-inapp' } }))).trackingId;
    ids.scheduledId = (await ok(call(acct, 'POST', '/send', { type: 'a-type', to: { id: 'victim' }, inapp: { title: 'A-MARKER-later' }, schedule: new Date(Date.now() + 86_400_000).toISOString() }))).trackingId;
    ids.outboxId = await eventually(async () => (await call(acct, 'GET', '/outbox')).json().messages?.[0]?.id, 15_000, 'outbox entry');
    ids.queryId = (await ok(call(acct, 'POST', '/logs/query', {}))).queryId;
    ids.e2 = e2.clientId;

    const always = (outcome: Outcome) => () => outcome;
    identities = [
      { name: 'account key of A', authorization: acct, envId: e1, entitled: true, expect: always('allowed') },
      { name: 'E1 environment key', authorization: `Bearer ${k1.key}`, envId: e1, entitled: true, expect: (p) => (p === 'account' ? 'forbidden' : 'allowed') },
      { name: 'E1 Basic', authorization: basic(e1, t.account.clientSecret), envId: e1, entitled: true, expect: (p) => (p === 'account' ? 'forbidden' : 'allowed') },
      { name: 'JWT of A with envId', authorization: await jwt(t.account.accountId), envId: e1, entitled: true, expect: always('allowed') },
      { name: 'JWT of A without envId', authorization: await jwt(t.account.accountId), entitled: true, expect: (p) => (IN_ENVIRONMENT(p) ? 'environment-required' : 'allowed') },
      // A public key reads what a web page may (permission browser) and is refused everything else.
      { name: 'E1 public key', authorization: `Bearer ${p1.key}`, envId: e1, entitled: true, expect: (p) => (p === 'browser' ? 'allowed' : 'forbidden') },
      { name: 'E2 public key naming E1', authorization: `Bearer ${p2.key}`, envId: e1, entitled: false, expect: always('forbidden') },
      { name: 'E2 environment key naming E1', authorization: `Bearer ${k2.key}`, envId: e1, entitled: false, expect: always('forbidden') },
      { name: 'E2 Basic naming E1', authorization: basic(e2.clientId, e2.clientSecret), envId: e1, entitled: false, expect: always('forbidden') },
      { name: 'E2 environment key', authorization: `Bearer ${k2.key}`, entitled: false, expect: (p) => (p === 'account' ? 'forbidden' : 'elsewhere') },
      { name: 'E2 Basic', authorization: basic(e2.clientId, e2.clientSecret), entitled: false, expect: (p) => (p === 'account' ? 'forbidden' : 'elsewhere') },
      { name: 'key of B naming E1', authorization: `Bearer ${b.apiKey}`, envId: e1, entitled: false, expect: always('unauthorized') },
      { name: 'Basic of B naming E1', authorization: basic(b.clientId, b.clientSecret), envId: e1, entitled: false, expect: always('refused') },
      { name: 'JWT of B naming E1', authorization: await jwt(b.accountId), envId: e1, entitled: false, expect: always('unauthorized') },
      { name: 'key of B', authorization: `Bearer ${b.apiKey}`, entitled: false, expect: always('elsewhere') },
      { name: 'Basic of B', authorization: basic(b.clientId, b.clientSecret), entitled: false, expect: (p) => (p === 'account' ? 'forbidden' : 'elsewhere') },
      { name: 'JWT of B', authorization: await jwt(b.accountId), entitled: false, expect: (p) => (IN_ENVIRONMENT(p) ? 'environment-required' : 'elsewhere') },
    ];
  });
  afterAll(() => t.close());

  interface Operation {
    method: string;
    path: string;
    permission: Permission;
  }

  async function operations(): Promise<Operation[]> {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const ops: Operation[] = [];
    for (const [path, methods] of Object.entries<Record<string, { 'x-permission'?: string }>>(doc.paths)) {
      for (const [lower, op] of Object.entries(methods)) {
        const method = lower.toUpperCase();
        const key = `${method} ${path.replace(/\{([^}]+)\}/g, ':$1')}`;
        const permission = PERMISSIONS[key];
        expect(permission, `${key} is not in the permission matrix`).toBeDefined();
        expect(op['x-permission'], `${key} documents its permission`).toBe(permission);
        ops.push({ method, path, permission: permission });
      }
    }
    return ops;
  }

  /** A URL for the operation: path ids of E1's records (or none), envId and the in-app user. */
  function urlOf(op: Operation, identity: Identity, realIds: boolean): string {
    const params: Record<string, string> = {
      clientId: op.path.startsWith('/environments') ? ids.e2 : t.account.clientId,
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
    // The environment in the older `/{clientId}/sender` path is a selector like ?envId=, not a record.
    const ignored = (name: string) => !realIds && !(name === 'clientId' && !op.path.startsWith('/environments'));
    let url = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(ignored(name) ? `none-${name}` : (params[name] ?? 'x')));
    const query = [];
    if (identity.envId) query.push(`envId=${identity.envId}`);
    if (op.permission === 'end-user') query.push('userId=victim');
    if (query.length) url += `?${query.join('&')}`;
    return url;
  }

  /**
   * `/{clientId}/sender` names its environment (E1) in the path as ?envId= does: an identity
   * without envId would be its twin that names E1, which the walk calls already.
   */
  const namesEnvironmentInPath = (op: Operation) => IN_ENVIRONMENT(op.permission) && op.path.startsWith('/{clientId}/');

  const BODIES: Record<string, unknown> = {
    'PATCH /environments/{clientId}': { title: 'pwned', secureMode: true, resetSecret: true, disableSending: ['EMAIL'] },
    'POST /environments': { title: 'pwned' },
    'POST /keys': { name: 'pwned', scope: 'account' },
    'PATCH /account': { autoUpgrade: true },
    'POST /users/{userId}': { id: 'victim', email: 'pwned@example.com' },
    'PATCH /types/{notificationId}': { title: 'pwned', enabled: false },
    'PATCH /components/{componentId}': { html: 'pwned' },
    'PATCH /notifications/{notificationId}/{channel}/templates/{templateId}': { subject: 'pwned' },
    'PATCH /notifications/{notificationId}/{channel}/templates/default-selection': { templateId: 'a-tpl' },
    'PUT /sender/scheduler/{trackingId}': { type: 'a-type', to: { id: 'victim' }, inapp: { title: 'pwned' }, schedule: new Date(Date.now() - 1000).toISOString() },
    'POST /{clientId}/sender': { type: 'a-type', to: { id: 'victim' }, inapp: { title: 'pwned' } },
    'POST /logs/bulk': { trackingIds: [] },
    'POST /logs/query': {},
    'PATCH /user/inapp': { trackingIds: [], archived: true },
    'PUT /settings/slack': { botToken: 'xoxb-pwned' },
    'POST /dev-carrier/inbound': { from: '+15005550006', text: 'STOP' },
  };

  it('lists every route of the server, and every route it lists exists', async () => {
    for (const key of Object.keys(PERMISSIONS)) {
      const [method, url] = key.split(' ') as [string, string];
      // The CORS plugin's catch-all preflight route is registered as "*" and found as "/*".
      expect(t.app.hasRoute({ method: method, url: url === '*' ? '/*' : url }), `${key} is in the matrix but not a route`).toBe(true);
    }
  });

  it('refuses or confines every identity that is not entitled, changing nothing of E1', async () => {
    const ops = await operations();
    expect(ops.length).toBeGreaterThan(70);
    const before = await snapshot();
    let checked = 0;
    for (const op of ops) {
      for (const identity of identities) {
        if (namesEnvironmentInPath(op) && !identity.envId) continue;
        const outcome = SERVER_PERMISSIONS.includes(op.permission) ? identity.expect(op.permission) : 'elsewhere';
        if (outcome === 'allowed' || outcome === 'environment-required') continue; // the second test
        if (identity.entitled && outcome === 'elsewhere') continue;
        const where = `${op.method} ${op.path} as ${identity.name}`;
        const payload = op.method === 'GET' || op.method === 'DELETE' ? undefined : (BODIES[`${op.method} ${op.path}`] ?? {});
        const res = await call(identity.authorization, op.method, urlOf(op, identity, true), payload);
        checked++;
        expect(res.statusCode, `${where}: ${res.body}`).toBeLessThan(500);
        if (outcome === 'forbidden') {
          expect([res.statusCode, res.json().error?.code], where).toEqual([403, 'FORBIDDEN']);
        } else if (outcome === 'unauthorized') {
          expect([res.statusCode, res.json().error?.code], where).toEqual([401, 'UNAUTHORIZED']);
        } else if (outcome === 'refused') {
          expect([401, 403], where).toContain(res.statusCode);
        }
        if (!identity.entitled) {
          for (const marker of markers) expect(res.body, `${where} leaked ${marker.slice(0, 12)}`).not.toContain(marker);
        }
      }
    }
    expect(checked).toBeGreaterThan(500);
    expect(await snapshot()).toBe(before);
  });

  it('lets every entitled identity through, and asks a JWT for envId where an environment is needed', async () => {
    for (const op of await operations()) {
      if (!SERVER_PERMISSIONS.includes(op.permission)) continue;
      for (const identity of identities) {
        if (namesEnvironmentInPath(op) && !identity.envId) continue;
        const outcome = identity.expect(op.permission);
        if (outcome !== 'allowed' && outcome !== 'environment-required') continue;
        const where = `${op.method} ${op.path} as ${identity.name}`;
        // Ids that name nothing and empty bodies: the call passes the permission check, then stops at its input.
        const payload = op.method === 'GET' || op.method === 'DELETE' ? undefined : {};
        const res = await call(identity.authorization, op.method, urlOf(op, identity, false), payload);
        expect(res.statusCode, `${where}: ${res.body}`).toBeLessThan(500);
        if (outcome === 'environment-required') {
          expect([res.statusCode, res.json().error?.code], where).toEqual([400, 'ENVIRONMENT_REQUIRED']);
        } else {
          expect([401, 403], `${where}: ${res.body}`).not.toContain(res.statusCode);
          if (res.statusCode === 400) expect(res.json().error.code, where).not.toBe('ENVIRONMENT_REQUIRED');
        }
      }
    }
  });
});

import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../src/errors.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/**
 * Walks /openapi.json and sends every operation bad input built from its own schema: NUL
 * characters, deep nesting, huge numbers, impossible or out-of-range dates, malformed escapes.
 * No answer may be a 5xx, and every non-2xx must be the Error body with a code of the closed list
 * and its status. The Twilio-protocol routes answer Twilio's shapes by design (README: Errors).
 */

type Schema = Record<string, unknown> & { $ref?: string };
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
interface Operation {
  method: Method;
  path: string;
  parameters: { name: string; in: 'path' | 'query' | 'header'; schema?: Schema }[];
  body?: Schema;
  inappAuth: boolean;
}
interface Probe {
  label: string;
  method: Method;
  url: string;
  payload?: string;
  twilio: boolean;
  inappAuth: boolean;
}

const TWILIO_PREFIXES = ['/dev-carrier/2010-04-01/', '/telephony/twilio/'];
const DEEP = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
const HUGE_NUMBERS = [1e308, -1e308, 1e20, 2 ** 63];
const BAD_DATES = ['2026-02-30T10:00:00Z', '2026-13-01', '2026-06-01T25:00:00Z', '+275760-09-13T00:00:00.001Z', '-271821-04-19T23:59:59Z', '99999-01-01'];
const LEAF_MUTATIONS: unknown[] = ['nul\u0000here', '\u0000', ...HUGE_NUMBERS, ...BAD_DATES, { deep: JSON.parse(`${'['.repeat(200)}${']'.repeat(200)}`) }];
const QUERY_MUTATIONS = ['%00', 'a%00b', '%ED%A0%80', '%C0%80', '1e308', '-1e308', '1e309', 'Infinity', '1e20', '9223372036854775808', ...BAD_DATES.map(encodeURIComponent)];
const PATH_MUTATIONS = ['%00', 'a%00b', '%ED%A0%80', '%C0%80', '%E0%A4%A', '%', '%zz', '1e308', '9223372036854775808', ...BAD_DATES.map(encodeURIComponent)];
// A sample value must never lead anywhere but loopback: URLs and hosts point at a closed local port.
const LOOPBACK_URL = 'http://127.0.0.1:9/fuzz';

function resolver(spec: { components?: { schemas?: Record<string, Schema> } }) {
  return (schema: Schema | undefined): Schema | undefined => {
    let s = schema;
    for (let i = 0; s?.$ref && i < 10; i++) s = spec.components?.schemas?.[s.$ref.split('/').pop() ?? ''];
    return s;
  };
}

/** A plausible value for a schema (all properties, one array item), to be mutated leaf by leaf. */
function sample(schema: Schema | undefined, resolve: (s: Schema | undefined) => Schema | undefined, name = '', depth = 0): unknown {
  const s = resolve(schema);
  if (!s || depth > 8) return 'x';
  const variants = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
  if (variants) {
    const pick = variants.map(resolve).find((v) => v && v.type !== 'null' && !(v.enum && (v.enum as unknown[])[0] === ''));
    return sample(pick ?? variants[0], resolve, name, depth + 1);
  }
  if (s.allOf) return sample((s.allOf as Schema[])[0], resolve, name, depth + 1);
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  const type = Array.isArray(s.type) ? (s.type as string[]).find((t) => t !== 'null') : s.type;
  switch (type) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, Schema>;
      const out: Record<string, unknown> = {};
      for (const [key, prop] of Object.entries(props)) out[key] = sample(prop, resolve, key, depth + 1);
      if (!Object.keys(props).length && s.additionalProperties !== false) out.fuzzKey = 'x';
      return out;
    }
    case 'array': {
      if (s.maxItems === 0) return [];
      // Two items where allowed: some fields are pairs (logs' dateRangeFilter is [start, end]).
      const length = s.uniqueItems ? Number(s.minItems ?? 1) || 1 : Math.max(Number(s.minItems ?? 1), Math.min(2, Number(s.maxItems ?? 2)));
      return Array.from({ length }, () => sample(s.items as Schema, resolve, name, depth + 1));
    }
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : 1;
    case 'boolean':
      return true;
    default: {
      if (s.format === 'date-time') return new Date(Date.now() + 86_400_000).toISOString();
      if (s.format === 'email' || /email/i.test(name)) return 'fuzz@example.test';
      if (s.format === 'uri' || /url|uri|link|icon|image|endpoint|redirect/i.test(name)) return LOOPBACK_URL;
      if (/host/i.test(name)) return '127.0.0.1';
      const min = typeof s.minLength === 'number' ? s.minLength : 1;
      return 'x'.repeat(Math.max(1, min));
    }
  }
}

/** Paths (lists of keys) of every primitive in a sampled value. */
function leaves(value: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(value)) return value.flatMap((v, i) => leaves(v, [...at, i]));
  if (value !== null && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => leaves(v, [...at, k]));
  return [at];
}

function withLeaf(value: unknown, path: (string | number)[], replacement: unknown): unknown {
  if (!path.length) return replacement;
  const copy = (Array.isArray(value) ? [...value] : { ...(value as object) }) as Record<string | number, unknown>;
  const [head, ...rest] = path as [string | number, ...(string | number)[]];
  copy[head] = withLeaf(copy[head], rest, replacement);
  return copy;
}

describe.each(STORAGE_KINDS)('fuzzing every operation of /openapi.json (%s)', (kind) => {
  let t: TestContext;
  let operations: Operation[];
  let resolve: (s: Schema | undefined) => Schema | undefined;
  let pathValues: Record<string, string>;

  beforeAll(async () => {
    t = await createTestContext(kind, {
      config: {
        publicUrl: 'http://127.0.0.1:9',
        smtpUrl: 'smtp://127.0.0.1:9',
        slackApiUrl: 'http://127.0.0.1:9/api',
        fcmBaseUrl: 'http://127.0.0.1:9',
        apnsProductionUrl: 'https://127.0.0.1:9',
        apnsSandboxUrl: 'https://127.0.0.1:9',
        allowPrivateNetworks: false,
      },
    });
    const seed = async (method: Method, url: string, payload: unknown) => {
      const res = await t.app.inject({ method, url, headers: t.auth, payload: payload as object });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
      return res.json();
    };
    await seed('POST', '/users/alice', { email: 'alice@example.test', number: '+15005550006' });
    await seed('POST', '/types', { notificationId: 'fz', title: 'Fuzz', channels: ['EMAIL', 'INAPP_WEB'] });
    await seed('POST', '/notifications/fz/EMAIL/templates', { templateId: 'tpl', subject: 'S', html: '<p>x</p>' });
    await seed('POST', '/components', { componentId: 'cmp', name: 'C', html: '<b/>' });
    const scheduled = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: t.auth,
      payload: { type: 'fz', to: { id: 'alice' }, inapp: { title: 'x' }, schedule: new Date(Date.now() + 86_400_000).toISOString() },
    });
    expect(scheduled.statusCode).toBe(200);
    pathValues = {
      userId: 'alice',
      notificationId: 'fz',
      channel: 'EMAIL',
      templateId: 'tpl',
      componentId: 'cmp',
      clientId: t.account.clientId,
      trackingId: scheduled.json().trackingId,
      trackingIds: scheduled.json().trackingId,
      // Never the key in use: a DELETE must not lock the fuzzer out.
      keyId: 'no-such-key',
    };

    const spec = (await t.app.inject({ method: 'GET', url: '/openapi.json', headers: t.auth })).json();
    resolve = resolver(spec);
    operations = [];
    for (const [path, methods] of Object.entries(spec.paths as Record<string, Record<string, Record<string, unknown>>>)) {
      for (const [method, op] of Object.entries(methods)) {
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        const content = (op.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined)?.content;
        operations.push({
          method: method.toUpperCase() as Method,
          path,
          parameters: (op.parameters ?? []) as Operation['parameters'],
          body: content ? Object.values(content)[0]?.schema : undefined,
          inappAuth: JSON.stringify(op.security ?? []).includes('inappUser'),
        });
      }
    }
    // Deletes last, so the seeded records serve every other operation first; before them what changes
    // the account, its keys or the environment (secure mode, a new secret, caps) under the others.
    const rank = (op: Operation) => (op.method === 'DELETE' ? 2 : /^\/(account|environments|keys)\b/.test(op.path) && op.method !== 'GET' ? 1 : 0);
    operations.sort((a, b) => rank(a) - rank(b));
  });
  afterAll(() => t.close());

  function probes(op: Operation): Probe[] {
    const twilio = TWILIO_PREFIXES.some((p) => op.path.startsWith(p));
    const pathParams = op.parameters.filter((p) => p.in === 'path');
    const queryParams = op.parameters.filter((p) => p.in === 'query');
    const buildPath = (override: Record<string, string> = {}) =>
      op.path.replace(/\{(\w+)\}/g, (_m, name: string) => override[name] ?? encodeURIComponent(pathValues[name] ?? 'x'));
    const baseQuery = queryParams.filter((p) => p.name === 'userId').map((p) => `${p.name}=alice`);
    const url = (path: string, query: string[] = baseQuery) => (query.length ? `${path}?${query.join('&')}` : path);
    const body = op.body ? sample(op.body, resolve) : undefined;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const out: Probe[] = [];
    const add = (label: string, u: string, p = payload) => out.push({ label, method: op.method, url: u, payload: p, twilio, inappAuth: op.inappAuth });

    for (const param of pathParams) {
      for (const bad of PATH_MUTATIONS) add(`path ${param.name}=${bad}`, url(buildPath({ [param.name]: bad })));
    }
    for (const param of queryParams) {
      for (const bad of QUERY_MUTATIONS) add(`query ${param.name}=${bad}`, url(buildPath(), [...baseQuery.filter((q) => !q.startsWith(`${param.name}=`)), `${param.name}=${bad}`]));
    }
    if (op.method !== 'GET' && op.method !== 'DELETE') {
      add('body nested 10,000 levels', url(buildPath()), DEEP);
      add('body property nested 10,000 levels', url(buildPath()), `{"fuzz":${DEEP}}`);
      add('body with a NUL key', url(buildPath()), JSON.stringify({ 'k\u0000': 1, ...(body as object) }));
      add('body with a __proto__ key', url(buildPath()), payload ? `{"__proto__":{"x":1},${payload.slice(1)}` : '{"__proto__":{"x":1}}');
      if (body !== undefined) {
        for (const leaf of leaves(body)) {
          for (const bad of LEAF_MUTATIONS) add(`body ${leaf.join('.')}=${JSON.stringify(bad).slice(0, 40)}`, url(buildPath()), JSON.stringify(withLeaf(body, leaf, bad)));
        }
      }
    }
    return out;
  }

  it('answers no 5xx, and the Error body with a listed code on every non-2xx', async () => {
    const failures: string[] = [];
    let sent = 0;
    const hash = createHmac('sha256', t.account.clientSecret).update('alice').digest('base64');
    const basic = `Basic ${Buffer.from(`${t.account.clientId}:alice:${hash}`).toString('base64')}`;
    for (const op of operations) {
      for (const probe of probes(op)) {
        sent++;
        const headers = { ...(probe.inappAuth ? { authorization: basic } : t.auth), 'content-type': 'application/json' };
        const res = await t.app.inject({ method: probe.method, url: probe.url, headers, ...(probe.payload !== undefined ? { payload: probe.payload } : {}) });
        const where = `${probe.method} ${op.path} [${probe.label}] -> ${res.statusCode}`;
        if (res.statusCode >= 500) failures.push(`${where}: ${res.body.slice(0, 200)}`);
        if (res.statusCode < 400 || probe.twilio) continue;
        let body: { trackingId?: unknown; error?: { code?: string; message?: unknown; fix?: unknown } } | undefined;
        try {
          body = res.json();
        } catch {
          body = undefined;
        }
        const code = body?.error?.code as keyof typeof ERROR_STATUS | undefined;
        const ok = typeof body?.trackingId === 'string' && code !== undefined && ERROR_STATUS[code] === res.statusCode && typeof body?.error?.message === 'string' && typeof body?.error?.fix === 'string';
        if (!ok) failures.push(`${where}: not the Error body: ${res.body.slice(0, 200)}`);
      }
    }
    expect(sent).toBeGreaterThan(1000);
    expect(failures).toEqual([]);
  }, 120_000);
});

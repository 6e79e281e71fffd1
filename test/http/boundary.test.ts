import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, maxDepth, parseJsonBody } from '../../src/http/json-body.js';
import { isCalendarDateTime } from '../../src/http/schemas.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { countAcceptedSends } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const deep = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

describe('JSON body parser', () => {
  it('measures nesting outside strings only', () => {
    expect(maxDepth('{"a":[{"b":"[[[{{{"}]}')).toBe(3);
    expect(maxDepth('{"a":"\\"[[[["}')).toBe(1);
    expect(maxDepth(deep(10_000))).toBe(10_000);
  });

  it('accepts the depth limit and refuses one level more', () => {
    expect(parseJsonBody(deep(MAX_JSON_DEPTH))).toBeInstanceOf(Array);
    expect(() => parseJsonBody(deep(MAX_JSON_DEPTH + 1))).toThrow(/nested 65 levels/);
  });

  it('tells a literal backslash-u0000 (allowed) from the NUL escape (refused)', () => {
    expect(parseJsonBody('{"a":"\\\\u0000"}')).toEqual({ a: '\\u0000' });
    expect(() => parseJsonBody('{"a":{"b":["x","y\\u0000"]}}')).toThrow(/NUL character .* at \$\.a\.b\[1\]/);
    expect(() => parseJsonBody('{"a\\u0000":1}')).toThrow(/NUL character .* \(a key\)/);
    expect(() => parseJsonBody('{"a":"\\ud800"}')).toThrow(/lone UTF-16 surrogate/);
    expect(parseJsonBody('{"a":"\\ud83d\\ude00"}')).toEqual({ a: '😀' });
  });
});

describe('calendar date-times', () => {
  it('accepts real instants in the forms Date reads', () => {
    for (const ok of ['2026-02-28', '2028-02-29T10:00:00Z', '2026-12-01T09:00', '2026-12-01T09:00:00.123+02:00', '2026-12-01 23:59:59z']) {
      expect(isCalendarDateTime(ok), ok).toBe(true);
    }
  });
  it('refuses days, months and times that do not exist, and years past 9999', () => {
    for (const bad of ['2026-02-30', '2027-02-29', '2026-13-01', '2026-00-10', '2026-04-31T10:00:00Z', '2026-01-01T25:00', '2026-01-01T10:60', '2026-01-01T10:00:61Z', '2026-01-01T10:00+24:00', '+275761-01-01T00:00:00Z', '99999-01-01', 'tomorrow', '']) {
      expect(isCalendarDateTime(bad), bad).toBe(false);
    }
  });
});

describe.each(STORAGE_KINDS)('bad input at the boundary (%s)', (kind) => {
  let t: TestContext;
  const expectError = (res: { statusCode: number; json(): { trackingId?: unknown; error?: { code?: string; message?: string } } }, status: number, code: string, message?: RegExp) => {
    expect(res.statusCode).toBe(status);
    const body = res.json();
    expect(typeof body.trackingId).toBe('string');
    expect(body.error?.code).toBe(code);
    if (message) expect(body.error?.message).toMatch(message);
  };
  const raw = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: string) =>
    t.app.inject({ method, url, headers: { ...t.auth, 'content-type': 'application/json' }, ...(payload !== undefined ? { payload } : {}) });

  beforeAll(async () => {
    t = await createTestContext(kind);
    await t.app.inject({ method: 'POST', url: '/users/alice', headers: t.auth, payload: { email: 'alice@example.test' } });
  });
  afterAll(() => t.close());

  it('refuses a NUL character in a path id and in a query string', async () => {
    expectError(await raw('GET', '/users/al%00ice'), 400, 'VALIDATION_FAILED', /path has a NUL/);
    expectError(await raw('DELETE', '/types/x%00'), 400, 'VALIDATION_FAILED', /path has a NUL/);
    expectError(await raw('GET', '/users?pageSize=1&after=%00'), 400, 'VALIDATION_FAILED', /query string has a NUL/);
    // "%2500" is the text "%00", not a NUL.
    expectError(await raw('GET', '/users/%2500'), 404, 'NOT_FOUND');
  });

  it('refuses a send with a NUL in inapp.title or email.subject, and accepts none of them', async () => {
    const before = await countAcceptedSends(t.deps);
    const inapp = await raw('POST', '/send', JSON.stringify({ type: 'nul', to: { id: 'alice' }, inapp: { title: 'hi\u0000there' } }));
    expectError(inapp, 400, 'VALIDATION_FAILED', /NUL character .* at \$\.inapp\.title/);
    const email = await raw('POST', '/send', JSON.stringify({ type: 'nul', to: { id: 'alice' }, email: { subject: '\u0000', html: '<p>x</p>' } }));
    expectError(email, 400, 'VALIDATION_FAILED', /\$\.email\.subject/);
    const key = await raw('POST', '/send', JSON.stringify({ type: 'nul', to: { id: 'alice' }, parameters: { 'a\u0000': 1 }, inapp: { title: 'x' } }));
    expectError(key, 400, 'VALIDATION_FAILED', /a key/);
    const surrogate = await raw('POST', '/users/bob', '{"email":"b@example.test","properties":{"name":"\\udc00"}}');
    expectError(surrogate, 400, 'VALIDATION_FAILED', /surrogate/);
    expect(await countAcceptedSends(t.deps)).toBe(before);
  });

  it('answers a body nested 10,000 levels with 400, not a stack overflow', async () => {
    const body = `{"type":"deep","to":{"id":"alice"},"parameters":{"x":${deep(10_000)}}}`;
    expectError(await raw('POST', '/send', body), 400, 'VALIDATION_FAILED', /nested over 10000 levels/);
    const objects = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
    expectError(await raw('POST', '/users/alice', objects), 400, 'VALIDATION_FAILED', /at most 64/);
  });

  it('refuses __proto__ and constructor.prototype keys on the types, components and templates routes', async () => {
    const cases: [string, string, string][] = [
      ['POST', '/types', '{"notificationId":"p1","title":"T","__proto__":{"x":1}}'],
      ['PATCH', '/types/p1', '{"options":{"__proto__":{"EMAIL":1}}}'],
      ['POST', '/components', '{"componentId":"c1","name":"N","constructor":{"prototype":{"x":1}}}'],
      ['POST', '/notifications/p1/EMAIL/templates', '{"templateId":"t1","subject":"S","__proto__":{"html":"x"}}'],
    ];
    for (const [method, url, payload] of cases) {
      expectError(await raw(method as 'POST', url, payload), 400, 'INVALID_JSON', /__proto__/);
    }
    // Nothing of these was stored.
    expectError(await raw('GET', '/types/p1'), 404, 'NOT_FOUND');
    expectError(await raw('GET', '/components/c1'), 404, 'NOT_FOUND');
    // The scope still reads an empty JSON body as none (the pingram SDK's DELETE).
    expect((await raw('POST', '/types', '{"notificationId":"p2","title":"T","channels":["EMAIL"]}')).statusCode).toBe(200);
    expect((await raw('DELETE', '/types/p2', '')).statusCode).toBe(200);
  });

  it('refuses impossible calendar dates as a schedule, on /send and on the scheduler', async () => {
    for (const schedule of ['2026-02-30T09:00:00Z', '2026-13-01', '2026-06-01T25:00:00Z', '+275760-09-13T00:00:00Z']) {
      const res = await raw('POST', '/send', JSON.stringify({ type: 'later', to: { id: 'alice' }, inapp: { title: 'x' }, schedule }));
      expectError(res, 400, 'VALIDATION_FAILED', /schedule/);
    }
    const at = new Date(Date.now() + 86_400_000).toISOString();
    const ok = await raw('POST', '/send', JSON.stringify({ type: 'later', to: { id: 'alice' }, inapp: { title: 'x' }, schedule: at }));
    expect(ok.statusCode).toBe(200);
    const put = await raw('PUT', `/sender/scheduler/${ok.json().trackingId}`, JSON.stringify({ schedule: '2027-02-29T10:00:00Z' }));
    expectError(put, 400, 'VALIDATION_FAILED', /schedule/);
  });
});

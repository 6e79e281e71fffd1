// Rate limits per credential and per client address (README: Rate limits): 429 RATE_LIMITED with
// Retry-After past a limit, the x-ratelimit-* headers once half an allowance is used, windows that
// end on the injected clock, and on PostgreSQL one count shared by every instance on the database.
import { randomBytes } from 'node:crypto';
import Fastify from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildDeps } from '../../src/deps.js';
import { installRateLimits } from '../../src/http/rate-limit.js';
import type { App } from '../../src/http/types.js';
import { Secrets } from '../../src/secrets.js';
import { buildServices } from '../../src/services.js';
import { registerMaintenanceJobs } from '../../src/modules/system/maintenance.jobs.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const PER_KEY = 4;
const PER_IP = 6;
const WINDOW_MS = 60_000;
/** Leases are at most 1/16 of what remains under a limit (src/modules/rate-limits/hit-counters.ts). */
const LEASE_SHARE = 16;
const limits = { rateLimitPerKey: PER_KEY, rateLimitPerIp: PER_IP, rateLimitWindowMs: WINDOW_MS };

type Inject = { app: App; method?: 'GET' | 'POST'; url?: string; from: string; headers?: Record<string, string>; payload?: object };
const call = ({ app, method = 'GET', url = '/users', from, headers = {}, payload }: Inject) => app.inject({ method, url, remoteAddress: from, headers, ...(payload ? { payload } : {}) });

/** The x-ratelimit-* headers of an answer: limit, remaining, reset (undefined when absent). */
const limitHeaders = (res: Awaited<ReturnType<typeof call>>) => ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'].map((h) => res.headers[h]);

/** Asserts the 429 answer: the Error body, Retry-After and the limit's headers. */
function expectRateLimited(res: Awaited<ReturnType<typeof call>>, max: number, retryAfter: number, what: RegExp) {
  const body = expectErrorBody(res, 429, 'RATE_LIMITED', what);
  expect(body.error.fix).toMatch(new RegExp(`Retry after ${retryAfter} s`));
  expect(res.headers['retry-after']).toBe(String(retryAfter));
  expect(res.headers['x-ratelimit-limit']).toBe(String(max));
  expect(res.headers['x-ratelimit-remaining']).toBe('0');
  expect(res.headers['x-ratelimit-reset']).toBe(String(retryAfter));
}

describe.each(STORAGE_KINDS)('rate limits (%s)', (kind) => {
  let t: TestContext;
  let second: { authorization: string };
  let publicKey: { authorization: string };
  const clock = new ManualClock();

  beforeAll(async () => {
    t = await createTestContext(kind, { clock, config: limits });
    // A second key of the same environment; the window of the request that made it then ends.
    const created = await call({ app: t.app, method: 'POST', url: '/keys', from: '192.0.2.99', headers: t.auth, payload: { name: 'second' } });
    expect(created.statusCode).toBe(200);
    second = { authorization: `Bearer ${created.json<{ key: string }>().key}` };
    const made = await call({ app: t.app, method: 'POST', url: '/keys', from: '192.0.2.99', headers: t.auth, payload: { name: 'web page', keyType: 'public' } });
    expect(made.statusCode).toBe(200);
    publicKey = { authorization: `Bearer ${made.json<{ key: string }>().key}` };
    clock.advance(WINDOW_MS);
  });
  afterAll(() => t?.close());

  it('limits each API key on its own, across routes, then lets it in again when its window ends', async () => {
    // Each request from another address: only the key's limit is near.
    let host = 0;
    const key = (headers: Record<string, string>, more: Partial<Inject> = {}) => call({ app: t.app, from: `192.0.2.${++host}`, headers, ...more });
    const first = await key(t.auth);
    expect(first.statusCode).toBe(200);
    // Far from the limit, no limit headers (they cost every answer); from half the allowance on, the key's.
    expect(limitHeaders(first)).toEqual([undefined, undefined, undefined]);
    const sent = await key(t.auth, { method: 'POST', url: '/send', payload: { type: 'rl', to: { id: 'ada' }, inapp: { title: 'hi' } } });
    expect(sent.statusCode).toBeLessThan(300);
    expect(limitHeaders(sent)).toEqual(['4', '2', '60']);
    expect(limitHeaders(await key(t.auth))).toEqual(['4', '1', '60']);
    expect(limitHeaders(await key(t.auth))).toEqual(['4', '0', '60']);

    clock.advance(20_000);
    expectRateLimited(await key(t.auth), PER_KEY, 40, /this credential: at most 4 per 60 s/);
    // The other key of the same environment is not throttled, nor are the environment's Basic
    // client credentials, a credential of their own.
    const client = { authorization: `Basic ${Buffer.from(`${t.account.clientId}:${t.account.clientSecret}`).toString('base64')}` };
    for (const other of [second, client, second]) expect((await key(other)).statusCode).toBe(200);
    expect(limitHeaders(await key(second))).toEqual(['4', '1', '60']);

    clock.advance(40_000);
    expect((await key(t.auth)).statusCode).toBe(200);
    expect(limitHeaders(await key(t.auth))).toEqual(['4', '2', '60']);
  });

  it('counts the callers of a public key per address only: anyone can read it from a page', async () => {
    const pages = await Promise.all(Array.from({ length: PER_KEY + 2 }, (_, i) => call({ app: t.app, url: '/components/public', from: `203.0.113.${100 + i}`, headers: publicKey })));
    expect(pages.map((r) => r.statusCode)).toEqual(Array(PER_KEY + 2).fill(200));
    // One visitor past the address limit is refused; the others are not.
    const visitor = await Promise.all(Array.from({ length: PER_IP + 1 }, () => call({ app: t.app, url: '/components/public', from: '203.0.113.99', headers: publicKey })));
    expect(visitor.map((r) => r.statusCode).sort()).toEqual([...Array(PER_IP).fill(200), 429]);
    expect((await call({ app: t.app, url: '/components/public', from: '203.0.113.98', headers: publicKey })).statusCode).toBe(200);
  });

  it('limits each client address, unauthenticated and in-app calls and refused credentials included', async () => {
    const from = '198.51.100.7';
    const inapp = { authorization: `Basic ${Buffer.from(`${t.account.clientId}:ada`).toString('base64')}` };
    const answers = [
      await call({ app: t.app, url: '/openapi.json', from }),
      await call({ app: t.app, url: `/${t.account.clientId}/users/ada/notifications/INAPP_WEB`, from, headers: inapp }),
      await call({ app: t.app, from, headers: { authorization: 'Bearer clarion_sk_wrong' } }),
      await call({ app: t.app, from, headers: { authorization: 'Bearer clarion_sk_wrong' } }),
      await call({ app: t.app, url: '/openapi.json', from }),
      await call({ app: t.app, url: '/openapi.json', from }),
    ];
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200, 401, 401, 200, 200]);
    expect(answers.map((r) => r.headers['x-ratelimit-remaining'])).toEqual([undefined, undefined, '3', '2', '1', '0']);
    expect(limitHeaders(answers[2])).toEqual(['6', '3', '60']);

    expectRateLimited(await call({ app: t.app, url: `/${t.account.clientId}/users/ada/notifications/INAPP_WEB`, from, headers: inapp }), PER_IP, 60, /this address: at most 6 per 60 s/);
    // Before authentication: a valid key from this address is refused too, and its own count is untouched.
    expectRateLimited(await call({ app: t.app, from, headers: second }), PER_IP, 60, /this address/);
    const elsewhere = await call({ app: t.app, from: '198.51.100.8', headers: second });
    expect(elsewhere.statusCode).toBe(200);

    // Health and metrics are never limited, and carry no limit headers.
    const status = await call({ app: t.app, url: '/status', from });
    expect(status.statusCode).toBe(200);
    expect(status.headers['x-ratelimit-limit']).toBeUndefined();
    expect((await call({ app: t.app, url: '/metrics', from })).statusCode).toBe(200);
    clock.advance(WINDOW_MS);
    expect((await call({ app: t.app, url: '/openapi.json', from })).statusCode).toBe(200);
  });

  it('lists the 429 in the OpenAPI document of the limited operations only', async () => {
    clock.advance(WINDOW_MS);
    const doc = (await call({ app: t.app, url: '/openapi.json', from: '203.0.113.4' })).json<{ paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }>();
    expect(doc.paths['/send'].post.responses['429']).toMatchObject({ description: expect.stringMatching(/^RATE_LIMITED/) });
    expect(doc.paths['/status'].get.responses['429']).toBeUndefined();
  });

  it('counts requests arriving at once exactly: a limit of 6 lets 6 of 10 in', async () => {
    clock.advance(WINDOW_MS);
    const answers = await Promise.all(Array.from({ length: 10 }, () => call({ app: t.app, url: '/openapi.json', from: '203.0.113.5' })));
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(PER_IP);
    expect(answers.filter((r) => r.statusCode === 429)).toHaveLength(10 - PER_IP);
    expect(answers.map((r) => r.headers['x-ratelimit-remaining'] ?? '-').sort()).toEqual(['-', '-', '0', '0', '0', '0', '0', '1', '2', '3']);
  });
});

/** Two instances on one database with these limits (the test context's, and another app on it), for the suite. */
function twoInstances(kind: (typeof STORAGE_KINDS)[number], clock: ManualClock, config: { rateLimitPerKey: number | null; rateLimitPerIp: number | null; rateLimitWindowMs: number }) {
  const pair = {} as { t: TestContext; otherApp: App; other: ReturnType<typeof buildDeps> };
  beforeAll(async () => {
    pair.t = await createTestContext(kind, { clock, config });
    pair.other = buildDeps(pair.t.deps.config, { storage: pair.t.storage.reopen(), logger: pino({ level: 'silent' }), secrets: new Secrets(randomBytes(32)), clock });
    pair.otherApp = await buildApp(pair.other, buildServices(pair.other));
    await pair.otherApp.ready();
  });
  afterAll(async () => {
    await pair.otherApp?.close();
    await pair.other?.storage.close();
    await pair.t?.close();
  });
  return pair;
}

describe.each(STORAGE_KINDS.filter((k) => k === 'postgres'))('rate limits shared by two instances on one database (%s)', (kind) => {
  const clock = new ManualClock();
  const two = twoInstances(kind, clock, limits);

  it('counts one key and one address once, whichever instance answers', async () => {
    const { t, otherApp } = two;
    const from = '192.0.2.50';
    expect((await call({ app: t.app, from, headers: t.auth })).statusCode).toBe(200);
    expect(limitHeaders(await call({ app: otherApp, from, headers: t.auth }))).toEqual(['4', '2', '60']);
    expect(limitHeaders(await call({ app: t.app, from, headers: t.auth }))).toEqual(['4', '1', '60']);
    expect(limitHeaders(await call({ app: otherApp, from, headers: t.auth }))).toEqual(['4', '0', '60']);
    expectRateLimited(await call({ app: t.app, from, headers: t.auth }), PER_KEY, 60, /this credential/);
    expectRateLimited(await call({ app: otherApp, from, headers: t.auth }), PER_KEY, 60, /this credential/);
    // The address counted all six, three on each instance (refused ones too): the seventh is refused.
    expectRateLimited(await call({ app: t.app, url: '/openapi.json', from }), PER_IP, 60, /this address/);

    clock.advance(WINDOW_MS);
    expect((await call({ app: otherApp, from, headers: t.auth })).statusCode).toBe(200);
  });

  it('keeps one row per bucket, and the hourly purge deletes those whose window ended', async () => {
    const { t } = two;
    const buckets = () => t.deps.db.selectFrom('rate_limit_counters' as never).select('bucket' as never).execute() as Promise<{ bucket: string }[]>;
    clock.advance(WINDOW_MS);
    await call({ app: t.app, url: '/openapi.json', from: '192.0.2.60' });
    // The key's bucket is its id, never the key itself.
    const key = await t.deps.db.selectFrom('api_keys').select('id').where('account_id', '=', t.account.accountId).executeTakeFirstOrThrow();
    expect((await buckets()).map((r) => r.bucket).sort()).toEqual(['ip:192.0.2.50', 'ip:192.0.2.60', `key:${key.id}`]);
    clock.advance(WINDOW_MS / 2);
    await call({ app: t.app, url: '/openapi.json', from: '192.0.2.61' });
    clock.advance(WINDOW_MS / 2 + 1);
    await registerMaintenanceJobs(t.deps).purge();
    expect((await buckets()).map((r) => r.bucket)).toEqual(['ip:192.0.2.61']);
  });
});

describe.each(STORAGE_KINDS.filter((k) => k === 'postgres'))('rate-limit leases on a shared database (%s)', (kind) => {
  // A limit high enough for leases: a statement takes the waiting request's position plus
  // floor((320 - counted - 1) / 16) spare ones (README: Rate limits).
  const MAX = 320;
  const clock = new ManualClock();
  const two = twoInstances(kind, clock, { rateLimitPerKey: null, rateLimitPerIp: MAX, rateLimitWindowMs: WINDOW_MS });
  const counted = async (bucket: string) =>
    ((await two.t.deps.db.selectFrom('rate_limit_counters' as never).select('count' as never).where('bucket' as never, '=', bucket as never).executeTakeFirst()) as { count: number | string } | undefined)
      ?.count;

  it('writes a busy bucket once per lease, not once per request, and leases less as the count nears the limit', async () => {
    const { t, otherApp } = two;
    clock.advance(WINDOW_MS);
    const from = '192.0.2.70';
    expect((await call({ app: t.app, from, headers: t.auth })).statusCode).toBe(200);
    // One statement: position 1, and 19 leased (floor(319 / 16))...
    expect(Number(await counted(`ip:${from}`))).toBe(20);
    for (let i = 0; i < 19; i++) expect((await call({ app: t.app, from, headers: t.auth })).statusCode).toBe(200);
    // ...given to the next 19 requests without a statement.
    expect(Number(await counted(`ip:${from}`))).toBe(20);
    expect((await call({ app: t.app, from, headers: t.auth })).statusCode).toBe(200);
    // The 21st took 1 + floor((320 - 20 - 1) / 16) = 19 more.
    expect(Number(await counted(`ip:${from}`))).toBe(39);
    // The other instance takes its positions after this one's lease; knowing no count of this
    // window yet, it leases as at a window's start: 1 + 19.
    expect((await call({ app: otherApp, from, headers: t.auth })).statusCode).toBe(200);
    expect(Number(await counted(`ip:${from}`))).toBe(39 + 20);
  });

  it('lets at most the limit through two instances, loses at most their leases, and refuses past it without writing', async () => {
    const { t, otherApp } = two;
    clock.advance(WINDOW_MS);
    const from = '192.0.2.71';
    let accepted = 0;
    let refused = 0;
    for (let i = 0; refused < 4; i++) {
      const res = await call({ app: i % 2 === 0 ? t.app : otherApp, from, headers: t.auth });
      if (res.statusCode === 200) accepted++;
      else {
        expectRateLimited(res, MAX, 60, /this address/);
        refused++;
      }
    }
    expect(accepted).toBeLessThanOrEqual(MAX);
    // Each instance holds at most 1/16 of what remained when it leased: near the limit, little.
    expect(accepted).toBeGreaterThanOrEqual(MAX - 2 * Math.ceil(MAX / LEASE_SHARE));
    // Both instances have seen the count past the limit: the rest of the window is refused in memory.
    const after = await counted(`ip:${from}`);
    for (let i = 0; i < 10; i++) expectRateLimited(await call({ app: i % 2 === 0 ? t.app : otherApp, from, headers: t.auth }), MAX, 60, /this address/);
    expect(await counted(`ip:${from}`)).toBe(after);

    // A lease ends with its window: the next request opens a new one in the database.
    clock.advance(WINDOW_MS);
    expect((await call({ app: t.app, from, headers: t.auth })).statusCode).toBe(200);
    expect(Number(await counted(`ip:${from}`))).toBe(20);
  });
});

describe('rate limits behind a reverse proxy, and turned off', () => {
  it('counts the client named by a trusted proxy, and ignores X-Forwarded-For from anyone else', async () => {
    const t = await createTestContext('sqlite', { config: { ...limits, rateLimitPerIp: 2, trustProxy: '127.0.0.1' } });
    try {
      const through = (client: string, from = '127.0.0.1') => call({ app: t.app, url: '/openapi.json', from, headers: { 'x-forwarded-for': client } });
      expect((await through('203.0.113.1')).statusCode).toBe(200);
      expect((await through('203.0.113.1')).statusCode).toBe(200);
      expectRateLimited(await through('203.0.113.1'), 2, 60, /this address/);
      // Another client behind the same proxy has its own count.
      expect((await through('203.0.113.2')).statusCode).toBe(200);
      // A client that is no trusted proxy cannot pick its address: its own is counted.
      const spoofed = await Promise.all(['198.51.100.1', '198.51.100.2', '198.51.100.3'].map((client) => through(client, '192.0.2.9')));
      expect(spoofed.map((r) => r.statusCode).sort()).toEqual([200, 200, 429]);
    } finally {
      await t.close();
    }
  });

  it('answers without limits or their headers when both are off', async () => {
    const t = await createTestContext('sqlite', { config: { rateLimitPerKey: null, rateLimitPerIp: null } });
    try {
      const answers = await Promise.all(Array.from({ length: 8 }, () => call({ app: t.app, from: '192.0.2.1', headers: t.auth })));
      expect(answers.map((r) => r.statusCode)).toEqual(Array(8).fill(200));
      expect(answers.map((r) => r.headers['x-ratelimit-limit'])).toEqual(Array(8).fill(undefined));
    } finally {
      await t.close();
    }
  });

  it('asks the counter nothing when both are off, and once per limit otherwise', async () => {
    const countedOn = async (settings: Parameters<typeof installRateLimits>[1]) => {
      const app = Fastify() as unknown as App;
      const buckets: string[] = [];
      installRateLimits(app, settings, { hit: (bucket) => (buckets.push(bucket), { count: 1, ttlMs: WINDOW_MS }) });
      app.get('/limited', { config: { auth: 'account' } }, () => ({}));
      const res = await app.inject({ url: '/limited', remoteAddress: '192.0.2.7' });
      expect(res.statusCode).toBe(200);
      await app.close();
      return buckets;
    };
    expect(await countedOn({ rateLimitPerKey: null, rateLimitPerIp: null, rateLimitWindowMs: WINDOW_MS })).toEqual([]);
    expect(await countedOn({ rateLimitPerKey: null, rateLimitPerIp: PER_IP, rateLimitWindowMs: WINDOW_MS })).toEqual(['ip:192.0.2.7']);
  });
});

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LogsRepository } from '../../src/modules/logs/logs.repository.js';
import { LOG_QUERY_JOB, QUERY_DEADLINE_MS } from '../../src/modules/logs/logs.service.js';
import type { LogsTables } from '../../src/modules/logs/logs.tables.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/** Processed messages with one delivered email each, received one second apart from `base`. */
async function insertLogs(t: TestContext, count: number, base = Date.parse('2026-01-01T00:00:00.000Z')): Promise<string[]> {
  const db = t.deps.db.withTables<SendingTables>();
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `0190${String(i).padStart(8, '0')}-0000-7000-8000-${String(base).padStart(12, '0').slice(-12)}`;
    const at = new Date(base + i * 1000).toISOString();
    ids.push(id);
    await db
      .insertInto('messages')
      .values({
        tracking_id: id, account_id: t.account.accountId, env_id: t.account.clientId, notification_id: 'welcome', user_id: `u${i}`,
        user_email: null, user_number: null, template_id: null, sub_notification_id: null, request: '{}', state: 'processed', job_id: null,
        ip: null, agent: null, received_at: at, processed_at: at, scheduled_for: null, schedule_updated_at: null, schedule_updated_to: null,
        schedule_deleted_at: null, failed_at: null, failed_code: null, failed_internal: null, skipped: null,
      })
      .execute();
  }
  return ids;
}

describe.each(STORAGE_KINDS)('log lookups and queries hold their bounds (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  const query = (payload: unknown, headers = t.auth) => t.app.inject({ method: 'POST', url: '/logs/query', headers, payload: payload as object });
  const result = (queryId: string, qs = '', headers = t.auth) => t.app.inject({ method: 'GET', url: `/logs/query/${queryId}${qs}`, headers });
  const finished = (queryId: string, headers = t.auth) =>
    eventually(async () => {
      const body = (await result(queryId, '', headers)).json();
      return body.status !== 'Running' ? body : undefined;
    }, 15_000, `query ${queryId} to finish`);

  it('POST /logs/bulk refuses 10^5 ids (and 26) with TOO_MANY_TRACKING_IDS, and an overlong id', async () => {
    for (const count of [100_000, 26]) {
      const res = await t.app.inject({ method: 'POST', url: '/logs/bulk', headers: t.auth, payload: { trackingIds: Array.from({ length: count }, (_, i) => `id-${i}`) } });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('TOO_MANY_TRACKING_IDS');
      expect(res.json().trackingId).toEqual(expect.any(String));
    }
    const long = 'x'.repeat(65);
    const bulk = await t.app.inject({ method: 'POST', url: '/logs/bulk', headers: t.auth, payload: { trackingIds: [long] } });
    expect([bulk.statusCode, bulk.json().error.code]).toEqual([400, 'VALIDATION_FAILED']);
    const get = await t.app.inject({ method: 'GET', url: `/logs/${long}`, headers: t.auth });
    expect([get.statusCode, get.json().error.code]).toEqual([400, 'VALIDATION_FAILED']);
    const ok = await t.app.inject({ method: 'POST', url: '/logs/bulk', headers: t.auth, payload: { trackingIds: Array.from({ length: 25 }, (_, i) => `id-${i}`) } });
    expect(ok.statusCode).toBe(200);
  });

  it('refuses dateRangeFilter values no date can hold, non-numbers and reversed ranges with VALIDATION_FAILED', async () => {
    const bad: unknown[] = [[-1e20, 1e20], [0, 1e20], [1e20, 1e20], [0, 'NaN'], ['Infinity', 1], [0, 'abc'], [1, 2, 3], [1], [2000, 1000], [0, 253402300800]];
    for (const dateRangeFilter of bad) {
      const res = await query({ dateRangeFilter });
      expect([res.statusCode, res.json().error?.code], JSON.stringify(dateRangeFilter)).toEqual([400, 'VALIDATION_FAILED']);
    }
    // 1e400 is Infinity once parsed.
    const inf = await t.app.inject({ method: 'POST', url: '/logs/query', headers: { ...t.auth, 'content-type': 'application/json' }, payload: '{"dateRangeFilter":[0,1e400]}' });
    expect([inf.statusCode, inf.json().error?.code]).toEqual([400, 'VALIDATION_FAILED']);
    // The widest range that is allowed runs (seconds, then milliseconds).
    for (const dateRangeFilter of [[0, 253402300799], [0, 253402300799999]]) {
      const res = await query({ dateRangeFilter });
      expect(res.statusCode).toBe(200);
      expect((await finished(res.json().queryId)).status).toBe('Complete');
    }
  });

  it('bounds every filter at the request: over the bound answers 400, never a query left Running', async () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
    const bad = [
      { envIdFilter: many(101) },
      { notificationFilter: many(40_000) },
      { channelFilter: Array(101).fill('email') },
      { userFilter: 'u'.repeat(257) },
      { statusFilter: 's'.repeat(257) },
      { notificationFilter: ['n'.repeat(257)] },
    ];
    for (const payload of bad) {
      const res = await query(payload);
      expect([res.statusCode, res.json().error?.code], Object.keys(payload)[0]).toEqual([400, 'VALIDATION_FAILED']);
    }
    const atBound = await query({ notificationFilter: many(100), envIdFilter: [t.account.clientId], userFilter: 'u'.repeat(256) });
    expect(atBound.statusCode).toBe(200);
    expect((await finished(atBound.json().queryId)).status).toBe('Complete');
  });

  it('a query whose job fails for good (permanent error, or its last attempt) ends Failed with a reason', async () => {
    const repo = new LogsRepository(t.deps.db);
    const start = async (id: string, filters: string, maxAttempts?: number) => {
      await repo.insertQuery({ id, account_id: t.account.accountId, env_id: t.account.clientId, filters, status: 'Running', result: null, error: null, created_at: t.deps.clock.now().toISOString(), completed_at: null });
      await t.deps.queue.enqueue(t.deps.db, LOG_QUERY_JOB, { queryId: id }, maxAttempts ? { maxAttempts } : {});
    };
    await start('q-permanent', 'not json');
    // Valid JSON the search cannot use: an ordinary error, which fails for good on its only attempt.
    await start('q-last-attempt', 'null', 1);
    for (const id of ['q-permanent', 'q-last-attempt']) {
      const body = await finished(id);
      expect(body.status).toBe('Failed');
      expect(body.error).toMatch(/failed/i);
      expect(body.logs).toBeUndefined();
    }
  });

  it('stores a finished result once and serves it in pages, every log exactly once, without searching again', async () => {
    const base = Date.parse('2026-02-01T00:00:00.000Z');
    const ids = await insertLogs(t, 25, base);
    const search = vi.spyOn(LogsRepository.prototype, 'findMessages');
    try {
      const { queryId } = (await query({ dateRangeFilter: [base / 1000, base / 1000 + 24] })).json();
      expect((await finished(queryId)).status).toBe('Complete');
      const searches = search.mock.calls.length;
      expect(searches).toBe(1);
      const readAll = async () => {
        const pages: string[][] = [];
        let token: string | undefined;
        do {
          const res = await result(queryId, `?limit=10${token ? `&nextToken=${token}` : ''}`);
          expect(res.statusCode).toBe(200);
          const body = res.json();
          pages.push(body.logs.map((l: { trackingId: string }) => l.trackingId));
          token = body.nextToken;
        } while (token);
        return pages;
      };
      const first = await readAll();
      expect(first.map((p) => p.length)).toEqual([10, 10, 5]);
      expect(first.flat()).toEqual([...ids].reverse());
      expect(await readAll()).toEqual(first);
      // Past PostgreSQL's integer column: refused as a token it never gave, not a 500.
      for (const bad of ['2147483648', '9007199254740991', '-1', 'x']) {
        const refused = await result(queryId, `?nextToken=${bad}`);
        expect(refused.statusCode, bad).toBe(400);
        expect(refused.json().error.message, bad).toMatch(/nextToken is not one this query gave/);
      }
      expect((await result(queryId, '?nextToken=2147483647')).json().logs).toEqual([]);
      // Without a limit, one page holds it all.
      const whole = (await result(queryId)).json();
      expect(whole.logs.map((l: { trackingId: string }) => l.trackingId)).toEqual(first.flat());
      expect(whole.nextToken).toBeUndefined();
      expect(search.mock.calls.length).toBe(searches);
      const stored = await t.deps.db.withTables<LogsTables>().selectFrom('log_query_results').select((eb) => eb.fn.countAll().as('n')).where('query_id', '=', queryId).executeTakeFirstOrThrow();
      expect(Number(stored.n)).toBe(25);
    } finally {
      search.mockRestore();
    }
    const badToken = await result('whatever-unknown', '?nextToken=1');
    expect(badToken.statusCode).toBe(404);
    expect((await result('x', '?limit=1001')).json().error.code).toBe('VALIDATION_FAILED');
  });

  it('the hourly purge removes old queries with their stored results', async () => {
    const { queryId } = (await query({})).json();
    expect((await finished(queryId)).status).toBe('Complete');
    const db = t.deps.db.withTables<LogsTables>();
    const count = async () => Number((await db.selectFrom('log_query_results').select((eb) => eb.fn.countAll().as('n')).where('query_id', '=', queryId).executeTakeFirstOrThrow()).n);
    expect(await count()).toBeGreaterThan(0);
    await db.updateTable('log_queries').set({ created_at: '2000-01-01T00:00:00.000Z' }).where('id', '=', queryId).execute();
    await t.workers!.purge();
    expect(await count()).toBe(0);
    expect((await result(queryId)).statusCode).toBe(404);
  });

  it('a query is looked up by account and environment: another environment of the account answers 404', async () => {
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Second' } })).json();
    const key = (await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'second', environmentId: env.clientId } })).json();
    const second = { authorization: `Bearer ${key.key}` };
    const mine = (await query({})).json().queryId;
    const theirs = (await query({}, second)).json().queryId;
    expect((await finished(mine)).status).toBe('Complete');
    expect((await finished(theirs, second)).status).toBe('Complete');
    const cross = await result(mine, '', second);
    expect([cross.statusCode, cross.json().error.code]).toEqual([404, 'NOT_FOUND']);
    expect((await result(theirs)).statusCode).toBe(404);

    // envIdFilter: other environments of the account for an account-scope key only.
    const sentThere = (await t.app.inject({ method: 'POST', url: '/send', headers: second, payload: { type: 'env-filter', to: { id: 'u2' }, inapp: { title: 'there' } } })).json().trackingId;
    const refused = await query({ envIdFilter: [env.clientId] }, { authorization: `Bearer ${(await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'first only' } })).json().key}` });
    expect([refused.statusCode, refused.json().error.code]).toEqual([403, 'FORBIDDEN']);
    await eventually(async () => (await t.app.inject({ method: 'GET', url: `/logs/${sentThere}`, headers: second })).json().logs?.[0], 15_000, 'the send logged');
    const across = (await query({ envIdFilter: [env.clientId], notificationFilter: ['env-filter'] })).json().queryId;
    const found = await finished(across);
    expect(found.logs.map((l: { trackingId: string }) => l.trackingId)).toEqual([sentThere]);
  });
});

describe.each(STORAGE_KINDS)('a log query no worker finishes (%s)', (kind) => {
  it('answers Running until its deadline, then Failed', async () => {
    const clock = new ManualClock();
    // No workers: the job never runs, as when its worker died on the last attempt.
    const t = await createTestContext(kind, { clock });
    try {
      const { queryId } = (await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: {} })).json();
      const poll = async () => (await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}`, headers: t.auth })).json();
      clock.advance(QUERY_DEADLINE_MS);
      expect((await poll()).status).toBe('Running');
      clock.advance(1);
      const failed = await poll();
      expect(failed.status).toBe('Failed');
      expect(failed.error).toMatch(/failed/i);
      expect((await poll()).status).toBe('Failed');
    } finally {
      await t.close();
    }
  });
});

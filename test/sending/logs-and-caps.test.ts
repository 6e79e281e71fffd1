import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { countAcceptedSends } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('logs, log queries and usage caps (%s)', (kind) => {
  let t: TestContext;
  const send = (payload: unknown, auth = t.auth) => t.app.inject({ method: 'POST', url: '/send', headers: auth, payload: payload as object });
  const ids: string[] = [];

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
    for (const [i, type] of ['alpha', 'beta', 'alpha'].entries()) {
      const res = await send({ type, to: { id: `u${i}`, email: `u${i}@example.com` }, inapp: { title: `#${i}` } });
      ids.push(res.json().trackingId);
    }
    await eventually(async () => {
      const logs = (await t.app.inject({ method: 'GET', url: `/logs/${ids.join(',')}`, headers: t.auth })).json().logs;
      return logs.length === 3 && logs.every((l: Record<string, unknown>) => l.inapp_delivered_at) ? logs : undefined;
    });
  });
  afterAll(() => t.close());

  it('reads logs by a URL-encoded comma list and in bulk', async () => {
    const res = await t.app.inject({ method: 'GET', url: `/logs/${encodeURIComponent(ids.join(','))}`, headers: t.auth });
    expect(res.statusCode).toBe(200);
    expect(res.json().logs.map((l: { trackingId: string }) => l.trackingId).sort()).toEqual([...ids].sort());
    const bulk = await t.app.inject({ method: 'POST', url: '/logs/bulk', headers: t.auth, payload: { trackingIds: ids.slice(0, 2) } });
    expect(bulk.json().logs).toHaveLength(2);
    // A UUID in upper case is the same id.
    const upper = await t.app.inject({ method: 'GET', url: `/logs/${ids[0].toUpperCase()}`, headers: t.auth });
    expect(upper.json().logs.map((l: { trackingId: string }) => l.trackingId)).toEqual([ids[0]]);
  });

  it('refuses more than 25 tracking ids', async () => {
    const many = Array.from({ length: 26 }, (_, i) => `id-${i}`).join(',');
    const res = await t.app.inject({ method: 'GET', url: `/logs/${many}`, headers: t.auth });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('TOO_MANY_TRACKING_IDS');
    // Real ids are UUIDs: 100 of them, plain or as the SDK encodes the list, still get the log route's own 400 (the spec gives it no 414).
    const uuids = Array.from({ length: 100 }, () => crypto.randomUUID());
    for (const list of [uuids.join(','), encodeURIComponent(uuids.join(','))]) {
      const long = await t.app.inject({ method: 'GET', url: `/logs/${list}`, headers: t.auth });
      expect(long.statusCode).toBe(400);
      expect(long.json().error).toMatchObject({ code: 'TOO_MANY_TRACKING_IDS', message: expect.stringContaining('got 100') });
    }
  });

  it('runs an asynchronous query whose filters combine with AND', async () => {
    const now = Math.floor(Date.now() / 1000);
    const start = await t.app.inject({
      method: 'POST',
      url: '/logs/query',
      headers: t.auth,
      payload: { dateRangeFilter: [now - 3600, now + 60], notificationFilter: ['alpha'], channelFilter: ['inapp'], statusFilter: 'delivered' },
    });
    expect(start.statusCode).toBe(200);
    const { queryId } = start.json();
    const result = await eventually(async () => {
      const r = (await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}`, headers: t.auth })).json();
      expect(['Running', 'Complete']).toContain(r.status);
      return r.status === 'Complete' ? r : undefined;
    });
    expect(result.logs.map((l: { trackingId: string }) => l.trackingId).sort()).toEqual([ids[0], ids[2]].sort());

    const narrower = (await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { notificationFilter: ['alpha'], userFilter: 'u2' } })).json();
    const r2 = await eventually(async () => {
      const r = (await t.app.inject({ method: 'GET', url: `/logs/query/${narrower.queryId}`, headers: t.auth })).json();
      return r.status === 'Complete' ? r : undefined;
    });
    expect(r2.logs.map((l: { trackingId: string }) => l.trackingId)).toEqual([ids[2]]);

    const past = (await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { dateRangeFilter: [now - 7200, now - 3600] } })).json();
    const r3 = await eventually(async () => {
      const r = (await t.app.inject({ method: 'GET', url: `/logs/query/${past.queryId}`, headers: t.auth })).json();
      return r.status === 'Complete' ? r : undefined;
    });
    expect(r3.logs).toEqual([]);
  });

  it("filters by the spec's voice channel: accepted, and no send delivers over it", async () => {
    const run = async (channelFilter: string[]) => {
      const start = await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { channelFilter } });
      expect(start.statusCode).toBe(200);
      const done = await eventually(async () => {
        const r = (await t.app.inject({ method: 'GET', url: `/logs/query/${start.json().queryId}`, headers: t.auth })).json();
        return r.status === 'Complete' ? r : undefined;
      });
      return done.logs.map((l: { trackingId: string }) => l.trackingId).sort();
    };
    expect(await run(['voice'])).toEqual([]);
    expect(await run(['voice', 'inapp'])).toEqual([...ids].sort());
  });

  it('validates query filters', async () => {
    // A misspelt filter is refused, not ignored into an unfiltered search.
    const misspelt = await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { userFiter: 'u1' } });
    expect([misspelt.statusCode, misspelt.json().error.message]).toEqual([400, expect.stringContaining('"userFiter" is not allowed')]);
    for (const payload of [{ dateRangeFilter: [1] }, { dateRangeFilter: [1, 2, 3] }, { dateRangeFilter: [5, 1] }, { channelFilter: ['fax'] }, { statusFilter: 'nope' }]) {
      const res = await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    expect((await t.app.inject({ method: 'GET', url: '/logs/query/unknown', headers: t.auth })).statusCode).toBe(404);
  });

  it('keeps every account to its own logs and queries', async () => {
    const other = await t.newAccount();
    const otherAuth = { authorization: `Bearer ${other.apiKey}` };
    const res = await t.app.inject({ method: 'GET', url: `/logs/${ids.join(',')}`, headers: otherAuth });
    expect(res.json().logs).toEqual([]);
    const mine = (await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: {} })).json();
    expect((await t.app.inject({ method: 'GET', url: `/logs/query/${mine.queryId}`, headers: otherAuth })).statusCode).toBe(404);
    const theirs = (await t.app.inject({ method: 'POST', url: '/logs/query', headers: otherAuth, payload: { envIdFilter: [t.account.clientId] } })).json();
    const r = await eventually(async () => {
      const x = (await t.app.inject({ method: 'GET', url: `/logs/query/${theirs.queryId}`, headers: otherAuth })).json();
      return x.status === 'Complete' ? x : undefined;
    });
    expect(r.logs).toEqual([]);
  });
});

describe.each(STORAGE_KINDS)('usage cap (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind, { config: { defaultMessagesCap: 2 } });
  });
  afterAll(() => t.close());

  it('answers 402 over messagesCap and accepts nothing', async () => {
    const send = () => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'capped', to: { id: 'c' }, inapp: { title: 'x' } } });
    expect((await send()).statusCode).toBe(200);
    expect((await send()).statusCode).toBe(200);
    const over = await send();
    expect(over.statusCode).toBe(402);
    expect(over.json().error.code).toBe('USAGE_LIMIT_EXCEEDED');
    expect(await countAcceptedSends(t.deps)).toBe(2);
    // Another account has its own cap.
    const other = await t.newAccount();
    const theirs = await t.app.inject({ method: 'POST', url: '/send', headers: { authorization: `Bearer ${other.apiKey}` }, payload: { type: 'capped', to: { id: 'c' }, inapp: { title: 'x' } } });
    expect(theirs.statusCode).toBe(200);
  });
});

import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LogsRepository } from '../../src/modules/logs/logs.repository.js';
import { LogsService } from '../../src/modules/logs/logs.service.js';
import type { LogsTables } from '../../src/modules/logs/logs.tables.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/**
 * A tenant's sends may carry bodies of many megabytes. No log read (by id, tail, query) may take
 * memory in proportion to them: a log carries at most the first 65,536 characters of a body,
 * marked, and a query's stored result stops at its size bound, saying so. No workers: the sends
 * stay as accepted, and each query's job is run here by hand.
 */
describe.each(STORAGE_KINDS)('log reads of large request bodies are bounded (%s)', (kind) => {
  let t: TestContext;
  let client: Pingram;
  beforeAll(async () => {
    t = await createTestContext(kind);
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl: address });
  });
  afterAll(async () => {
    await t?.close();
  });

  const REQUEST_CHARS = 65_536;
  const marker = (bytes: number) => `…[request truncated: ${bytes} bytes in all]`;
  const send = async (type: string, parameter: string) => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type, to: { id: 'bq1' }, parameters: { s: parameter } } });
    expect(res.statusCode).toBeLessThan(300);
    return res.json().trackingId as string;
  };
  /** The request bodies as stored, by tracking id (once they are message rows). */
  const storedRequests = async (ids: string[]) => {
    const rows = await t.deps.db.withTables<SendingTables>().selectFrom('messages').select(['tracking_id', 'request']).where('tracking_id', 'in', ids).execute();
    return new Map(rows.map((r) => [r.tracking_id, r.request]));
  };
  const logsOf = async (url: string) => {
    const res = await t.app.inject({ method: 'GET', url, headers: t.auth });
    expect(res.statusCode).toBe(200);
    return { size: res.payload.length, logs: res.json().logs as Record<string, unknown>[] };
  };
  const queryResult = async (queryId: string, qs = '') => (await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}${qs}`, headers: t.auth })).json();

  it('a log carries a large body cut to 65,536 characters with its marker and size, and a small one whole (by id, tail, query)', async () => {
    // 2.1 MB each: far past the bound, small enough to keep the test quick.
    const big = [await send('bigreq', `${'aB '.repeat(700_000)}far-end`), await send('bigreq', 'é'.repeat(1_100_000))];
    const small = await send('bigreq', 'hello');
    const ids = [...big, small];

    const check = (logs: Record<string, unknown>[], requests: Map<string, string>) => {
      expect(logs.map((l) => l.trackingId).sort()).toEqual([...ids].sort());
      for (const log of logs) {
        const whole = requests.get(log.trackingId as string)!;
        if (log.trackingId === small) {
          expect(log.request).toBe(whole);
          expect(log).not.toHaveProperty('request_truncated');
          expect(log).not.toHaveProperty('request_bytes');
          continue;
        }
        const bytes = Buffer.byteLength(whole);
        expect(log.request_truncated).toBe(true);
        expect(log.request_bytes).toBe(bytes);
        expect(log.request).toBe(whole.slice(0, REQUEST_CHARS) + marker(bytes));
      }
    };

    // As accepted (on SQLite, still in the intake journal), then as message rows.
    const asAccepted = await logsOf(`/logs/${ids.join(',')}`);
    await logsOf('/logs/tail');
    const requests = await storedRequests(ids);
    expect(Math.min(...big.map((id) => Buffer.byteLength(requests.get(id)!)))).toBeGreaterThan(2_000_000);
    check(asAccepted.logs, requests);
    const byId = await logsOf(`/logs/${ids.join(',')}`);
    check(byId.logs, requests);
    expect(byId.size).toBeLessThan(3 * 70_000);
    const tail = await logsOf('/logs/tail');
    check(tail.logs.filter((l) => ids.includes(l.trackingId as string)), requests);
    expect(tail.size).toBeLessThan(100 * 70_000);

    const { queryId } = (await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { notificationFilter: ['bigreq'] } })).json();
    await t.services.logs.runQuery(queryId);
    const result = await queryResult(queryId);
    expect(result.status).toBe('Complete');
    // A result within its bound is as it always was: no truncation fields.
    expect(result).not.toHaveProperty('truncated');
    expect(result).not.toHaveProperty('message');
    check(result.logs, requests);
    expect(result.logs.map((l: { trackingId: string }) => l.trackingId)).toEqual([...ids].reverse());

    // The older server SDK's requestFilter still searches whole bodies, past the part a log shows.
    const older = await t.app.inject({ method: 'POST', url: `/${t.account.clientId}/logs/query`, headers: t.auth, payload: { notificationFilter: ['bigreq'], requestFilter: ['far-end', 'hello'] } });
    expect(older.statusCode).toBe(200);
    await t.services.logs.runQuery(older.json().queryId);
    const filtered = await queryResult(older.json().queryId);
    expect(filtered.logs.map((l: { trackingId: string }) => l.trackingId)).toEqual([small, big[0]]);
  });

  it("a query's stored result stops at its size bound, and says so on every page, as the SDK reads it", async () => {
    // Bounds scaled down (injected), so a few sends of 20 KB show them.
    const service = new LogsService(t.deps, t.deps.queue, { requestChars: 1000, resultChars: 12_000, searchPage: 3 });
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await send('bigpage', `${i}:${'x'.repeat(20_000)}`));
    const { queryId } = (await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { notificationFilter: ['bigpage'] } })).json();
    await service.runQuery(queryId);

    const stored = await t.deps.db.withTables<LogsTables>().selectFrom('log_query_results').select('log').where('query_id', '=', queryId).orderBy('position').execute();
    const chars = stored.reduce((n, r) => n + r.log.length, 0);
    expect(chars).toBeLessThanOrEqual(12_000);
    // Each log is its request's first 1,000 characters and the rest of the record: several fit, not all.
    expect(stored.length).toBeGreaterThan(3);
    expect(stored.length).toBeLessThan(30);
    for (const r of stored) {
      const log = JSON.parse(r.log) as Record<string, unknown>;
      expect(log.request_truncated).toBe(true);
      expect((log.request as string).length).toBe(1000 + marker(log.request_bytes as number).length);
    }

    const pages: Record<string, unknown>[] = [];
    let token: string | undefined;
    do {
      const page = await queryResult(queryId, `?limit=2${token ? `&nextToken=${token}` : ''}`);
      expect(page.status).toBe('Complete');
      expect(page.truncated).toBe(true);
      expect(page.message).toContain(`The result stops at ${stored.length} logs`);
      pages.push(...page.logs);
      token = page.nextToken;
    } while (token);
    // The newest first, none skipped before the stop.
    expect(pages.map((l) => l.trackingId)).toEqual([...ids].reverse().slice(0, stored.length));

    const sdk = await client.logs.getLogsQueryResult(queryId);
    expect(sdk.status).toBe('Complete');
    expect(sdk.message).toContain(`The result stops at ${stored.length} logs`);
    expect(sdk.logs).toHaveLength(stored.length);
  });

  it('a query whose previous run never ended is marked Failed at its next attempt, not searched again', async () => {
    await send('lostrun', 'small');
    const start = async () => (await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { notificationFilter: ['lostrun'] } })).json().queryId as string;
    const search = vi.spyOn(LogsRepository.prototype, 'findMessages');
    try {
      // Attempt 1 dies mid-search (as a process that ran out of memory): it never returns.
      const lost = await start();
      let entered!: () => void;
      const reached = new Promise<void>((resolve) => (entered = resolve));
      search.mockImplementationOnce(() => {
        entered();
        return new Promise(() => {});
      });
      void t.services.logs.runQuery(lost, { attempt: 1 });
      await reached;
      expect((await queryResult(lost)).status).toBe('Running');
      // The queue runs it again (a restart, its lock expired): attempt 2 fails it without searching.
      await t.services.logs.runQuery(lost, { attempt: 2 });
      expect(search).toHaveBeenCalledTimes(1);
      const failed = await queryResult(lost);
      expect(failed.status).toBe('Failed');
      expect(failed.error).toMatch(/stopped without finishing/);

      // An attempt that threw is retried as before; a run the queue gave back uncounted (same attempt) runs.
      const retried = await start();
      search.mockImplementationOnce(() => Promise.reject(new Error('connection lost')));
      await expect(t.services.logs.runQuery(retried, { attempt: 1 })).rejects.toThrow('connection lost');
      await t.services.logs.runQuery(retried, { attempt: 2 });
      expect((await queryResult(retried)).status).toBe('Complete');
      const released = await start();
      await new LogsRepository(t.deps.db).markRun(released, 1);
      await t.services.logs.runQuery(released, { attempt: 1 });
      const done = await queryResult(released);
      expect(done.status).toBe('Complete');
      expect(done.logs).toHaveLength(1);
    } finally {
      search.mockRestore();
    }
  });
});

// A send answered 2xx is visible before any worker has run, and its processing happens once,
// however often the work is retried. On SQLite immediate sends are journaled (send_intake
// chunks) and ingested by a job; on PostgreSQL they are written as messages at once. The same
// contract holds on both.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { countAcceptedSends } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { type Workers, startWorkers } from '../../src/workers.js';
import { DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';

describe.each(STORAGE_KINDS)('accepted sends before and during ingestion (%s)', (kind) => {
  let t: TestContext;
  let workers: Workers | undefined;
  const send = (payload: unknown) => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
  const logs = async (ids: string[]) => (await t.app.inject({ method: 'GET', url: `/logs/${ids.join(',')}`, headers: t.auth })).json().logs as Record<string, unknown>[];
  const inapp = async (userId: string) =>
    (await t.deps.db.selectFrom('inapp_notifications' as never).select((eb) => eb.fn.countAll().as('n')).where('user_id' as never, '=', userId as never).executeTakeFirstOrThrow()) as {
      n: number | string;
    };

  beforeEach(async () => {
    t = await createTestContext(kind);
  });
  afterEach(async () => {
    await workers?.stop();
    workers = undefined;
    await t.close();
  });

  it('answers a log for a send the moment it is accepted, before any worker ran, and refuses to reschedule it', async () => {
    const res = await send({ type: 'journal_log', to: { id: 'j-1', email: 'j1@example.com' }, parameters: { n: 1 }, inapp: { title: 'hi {{ n }}' } });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json();
    const [log] = await logs([trackingId, 'not-a-send']);
    expect(log).toMatchObject({ trackingId, type: 'journal_log', user_id: 'j-1', user_email: 'j1@example.com' });
    expect(log.inapp_delivered_at).toBeFalsy();
    const bulk = await t.app.inject({ method: 'POST', url: '/logs/bulk', headers: t.auth, payload: { trackingIds: [trackingId] } });
    expect(bulk.json().logs.map((l: { trackingId: string }) => l.trackingId)).toEqual([trackingId]);
    // Another account cannot see it.
    const other = await t.newAccount();
    const theirs = await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: { authorization: `Bearer ${other.apiKey}` } });
    expect(theirs.json().logs).toEqual([]);
    // Queued, not scheduled: the scheduler routes answer 409, not 404.
    const put = await t.app.inject({ method: 'PUT', url: `/sender/scheduler/${trackingId}`, headers: t.auth, payload: { type: 'journal_log', to: { id: 'j-1' }, schedule: new Date(Date.now() + 60_000).toISOString() } });
    expect(put.statusCode).toBe(409);
    expect((await t.app.inject({ method: 'DELETE', url: `/sender/scheduler/${trackingId}`, headers: t.auth })).statusCode).toBe(409);

    workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10 });
    const delivered = await eventually(async () => {
      const [l] = await logs([trackingId]);
      return l?.inapp_delivered_at ? l : undefined;
    });
    expect(delivered).toMatchObject({ trackingId, user_id: 'j-1', inapp_routing: 'SEND' });
    expect(Number((await inapp('j-1')).n)).toBe(1);
  });

  it('a log query started while sends wait for a worker includes all of them', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push((await send({ type: 'journal_query', to: { id: `q-${i}` }, inapp: { title: 'x' } })).json().trackingId);
    expect(await countAcceptedSends(t.deps, { notification_id: 'journal_query' })).toBe(40);
    const started = await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { notificationFilter: ['journal_query'] } });
    const { queryId } = started.json();
    workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10 });
    const result = await eventually(async () => {
      const r = (await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}`, headers: t.auth })).json();
      return r.status === 'Complete' ? r : undefined;
    });
    expect(result.logs.map((l: { trackingId: string }) => l.trackingId).sort()).toEqual([...ids].sort());
  });

  it('processes each send once when its ingestion runs again after a crash', async () => {
    for (let i = 0; i < 20; i++) expect((await send({ type: 'journal_twice', to: { id: 'twice' }, inapp: { title: `#${i}` } })).statusCode).toBe(200);
    workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10 });
    await eventually(async () => Number((await inapp('twice')).n) === 20);
    if (kind === 'sqlite') {
      // The crash: message rows written and processed, the chunk not yet dropped. Put a chunk
      // back and run its job again.
      const rows = await t.deps.db.selectFrom('messages' as never).selectAll().where('notification_id' as never, '=', 'journal_twice' as never).execute();
      const { lastInsertRowid } = t.deps.storage.sqlite!.prepare('INSERT INTO send_intake (messages, created_at) VALUES (?, ?)').run(JSON.stringify(rows.slice(0, 16)), new Date().toISOString());
      await workers.worker.ingestSends(Number(lastInsertRowid));
      const left = t.deps.storage.sqlite!.prepare('SELECT count(*) AS n FROM send_intake').get() as { n: number };
      expect(left.n).toBe(0);
    }
    expect(Number((await inapp('twice')).n)).toBe(20);
    expect(await countAcceptedSends(t.deps, { notification_id: 'journal_twice' })).toBe(20);
  });
});

describe('intake journal lookups (sqlite)', () => {
  let t: TestContext;
  beforeEach(async () => {
    t = await createTestContext('sqlite');
  });
  afterEach(async () => {
    await t.close();
  });

  it('finds a pending send by reading only the chunks whose id range holds it, through the indexes', async () => {
    const sqlite = t.deps.storage.sqlite!;
    const sent: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'lookup', to: { id: `l-${i}` }, inapp: { title: `#${i}` } } });
      sent.push(res.json().trackingId);
    }
    const ranges = sqlite.prepare('SELECT first_id, last_id FROM send_intake ORDER BY seq').all() as { first_id: string; last_id: string }[];
    expect(ranges.length).toBeGreaterThan(0);
    for (const id of sent) expect(ranges.some((r) => r.first_id <= id && id <= r.last_id)).toBe(true);
    // A chunk whose range holds none of them, though its text names one, and which cannot even
    // be parsed: never read (a scan of the chunks' text would pick it and fail).
    sqlite
      .prepare('INSERT INTO send_intake (messages, created_at, first_id, last_id) VALUES (?, ?, ?, ?)')
      .run(`not json ${sent[0]}`, new Date().toISOString(), 'ffffffff-0000', 'ffffffff-ffff');
    const logs = (await t.app.inject({ method: 'GET', url: `/logs/${sent.join(',')}`, headers: t.auth })).json().logs as { trackingId: string }[];
    expect(logs.map((l) => l.trackingId).sort()).toEqual([...sent].sort());

    const plan = (query: string) => (sqlite.prepare(`EXPLAIN QUERY PLAN ${query}`).all() as { detail: string }[]).map((r) => r.detail).join('; ');
    expect(plan("SELECT seq FROM send_intake WHERE last_id >= 'a' AND first_id <= 'a'")).toMatch(/COVERING INDEX send_intake_id_range/);
    expect(plan("SELECT seq FROM send_intake WHERE created_at >= 'a' AND created_at <= 'b' LIMIT 1")).toMatch(/COVERING INDEX send_intake_created/);
  });
});

describe('ingesting journal chunks in a batch (sqlite)', () => {
  let t: TestContext;
  beforeEach(async () => {
    t = await createTestContext('sqlite');
  });
  afterEach(async () => {
    await t.close();
  });

  it('gives each chunk the outcome of its own job: a failing one stays for its retry, the others are processed and dropped', async () => {
    const sqlite = t.deps.storage.sqlite!;
    const ids: string[] = [];
    // One request at a time: one chunk each.
    for (const title of ['broken', 'fine']) {
      const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'batch_ingest', to: { id: `b-${title}` }, inapp: { title } } });
      ids.push(res.json().trackingId);
    }
    const seqs = (sqlite.prepare('SELECT seq FROM send_intake ORDER BY seq').all() as { seq: number }[]).map((r) => r.seq);
    expect(seqs).toHaveLength(2);
    const { executors, close } = buildExecutors(t.deps, t.services);
    const inapp = executors.INAPP_WEB!;
    const preview = inapp.preview.bind(inapp);
    inapp.preview = (content) => {
      if (content.title === 'broken') throw new Error('preview exploded');
      return preview(content);
    };
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
    const state = (trackingId: string) => sqlite.prepare('SELECT state, failed_code FROM messages WHERE tracking_id = ?').get(trackingId) as { state: string; failed_code: string | null } | undefined;
    const job = (attempt: number) => ({ id: '', name: 'sends.ingest', attempt, maxAttempts: 3 });
    try {
      const first = await worker.ingestChunks(seqs.map((seq) => ({ data: { seq }, job: job(1) })));
      expect((first[0] as Error).message).toContain('preview exploded');
      expect(first[1]).toBeUndefined();
      expect((sqlite.prepare('SELECT seq FROM send_intake').all() as { seq: number }[]).map((r) => r.seq)).toEqual([seqs[0]]);
      expect(state(ids[0])).toMatchObject({ state: 'queued' });
      expect(state(ids[1])).toMatchObject({ state: 'processed' });

      // Its last attempt: the message fails for good, the chunk is dropped, the job ends without a retry.
      const last = await worker.ingestChunks([{ data: { seq: seqs[0] }, job: job(3) }]);
      expect((last[0] as Error).name).toBe('PermanentJobError');
      expect(sqlite.prepare('SELECT count(*) AS n FROM send_intake').get()).toEqual({ n: 0 });
      expect(state(ids[0])).toMatchObject({ state: 'failed', failed_code: 'PROCESSING_FAILED' });
    } finally {
      await worker.close();
      await close();
    }
  });
});

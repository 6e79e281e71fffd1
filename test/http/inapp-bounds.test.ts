import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { InappService, MAX_REPLIES_PER_NOTIFICATION, MAX_REPLY_BYTES, type StoreInappInput } from '../../src/modules/inapp/inapp.service.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const basic = (clientId: string, userId: string) => ({
  authorization: `Basic ${Buffer.from(`${clientId}:${userId}`).toString('base64')}`,
});

describe.each(STORAGE_KINDS)('in-app bounds: dates and replies (%s)', (kind) => {
  let t: TestContext;
  let service: InappService;
  const clock = new ManualClock(new Date('2026-01-15T10:00:00.000Z'));

  beforeAll(async () => {
    t = await createTestContext(kind, { clock });
    service = new InappService(t.deps);
  });
  afterAll(() => t.close());

  const input = (userId: string, trackingId: string): StoreInappInput => ({
    accountId: t.account.accountId,
    envId: t.account.clientId,
    userId,
    trackingId,
    notificationId: 'comment',
    title: 'New comment',
  });
  /** Both routes the in-app clients use: the SDK's /user/inapp and the published client's path. */
  const routes = (userId: string) => [
    { url: '/user/inapp', headers: basic(t.account.clientId, userId) },
    { url: `/${t.account.clientId}/users/${encodeURIComponent(userId)}/notifications/INAPP_WEB`, headers: basic(t.account.clientId, userId) },
  ];
  const stored = async (userId: string, trackingId: string) => {
    const res = await t.app.inject({ method: 'GET', url: '/user/inapp?count=1000', headers: basic(t.account.clientId, userId) });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().notifications as Array<Record<string, unknown>>).find((n) => n.id === trackingId);
  };
  const expectError = (res: LightMyRequestResponse, status: number, code: string) => {
    expect(res.statusCode).toBe(status);
    const body = res.json();
    expect(body).toMatchObject({ trackingId: expect.any(String), error: { code, message: expect.any(String) } });
  };

  it('refuses opened/clicked (and every status and reply date) outside the dates it can store, with 400 VALIDATION_FAILED', async () => {
    const u = `dates-${randomUUID()}`;
    await service.store(t.deps.db, input(u, 'd1'));
    const outOfRange: unknown[] = [1e20, -1e20, '100000000000000000000', '+275760-09-13T00:00:00.001Z', '+010000-01-01T00:00:00.000Z', 'not a date', '2026-02-30T25:00:00Z', {}, []];
    for (const { url, headers } of routes(u)) {
      for (const value of outOfRange) {
        for (const field of ['opened', 'clicked', 'archived', 'actioned1', 'actioned2']) {
          const res = await t.app.inject({ method: 'PATCH', url, headers, payload: { trackingIds: ['d1'], [field]: value } });
          expectError(res, 400, 'VALIDATION_FAILED');
          expect(res.json().error.message).toContain(field);
        }
      }
      const reply = await t.app.inject({ method: 'PATCH', url, headers, payload: { trackingIds: ['d1'], reply: { date: '99999999999999999999', message: 'hi' } } });
      expectError(reply, 400, 'VALIDATION_FAILED');
      const before = await t.app.inject({ method: 'GET', url: `${url}?before=100000000000000000000`, headers });
      expectError(before, 400, 'VALIDATION_FAILED');
    }
    // Nothing was written by the refused requests.
    const row = await stored(u, 'd1');
    expect(row).toBeDefined();
    for (const field of ['opened', 'clicked', 'archived', 'actioned1', 'actioned2', 'replies']) expect(row?.[field]).toBeUndefined();
  });

  it('still accepts what the published client sends (ISO strings, null) and epoch seconds/milliseconds at the edges of the range', async () => {
    const u = `dates-ok-${randomUUID()}`;
    await service.store(t.deps.db, input(u, 'd2'));
    const [route] = routes(u).slice(1);
    const patch = (payload: object) => t.app.inject({ method: 'PATCH', url: route.url, headers: route.headers, payload: { trackingIds: ['d2'], ...payload } });
    expect((await patch({ opened: '2026-01-15T10:05:00.000Z', clicked: 1768471500000, archived: '9999-12-31T23:59:59.999Z', actioned1: 0 })).statusCode).toBe(200);
    expect(await stored(u, 'd2')).toMatchObject({
      opened: '2026-01-15T10:05:00.000Z',
      clicked: '2026-01-15T10:05:00.000Z',
      archived: '9999-12-31T23:59:59.999Z',
      actioned1: '1970-01-01T00:00:00.000Z',
    });
    expect((await patch({ archived: null, actioned1: false })).statusCode).toBe(200);
    const row = await stored(u, 'd2');
    expect(row?.archived).toBeUndefined();
    expect(row?.actioned1).toBeUndefined();
  });

  it(`keeps at most ${MAX_REPLIES_PER_NOTIFICATION} replies per notification: one more is 409 CONFLICT and the whole PATCH is left unwritten`, async () => {
    const u = `replies-${randomUUID()}`;
    await service.store(t.deps.db, input(u, 'r-full'));
    await service.store(t.deps.db, input(u, 'r-room'));
    const [route] = routes(u);
    const patch = (payload: object) => t.app.inject({ method: 'PATCH', url: route.url, headers: route.headers, payload });
    const batch = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ date: '2026-01-15T10:00:00.000Z', message: `${tag} ${i}` }));

    expect((await patch({ trackingIds: ['r-full'], replies: batch(MAX_REPLIES_PER_NOTIFICATION, 'full') })).statusCode).toBe(200);
    expect((await patch({ trackingIds: ['r-room'], replies: batch(MAX_REPLIES_PER_NOTIFICATION - 2, 'room') })).statusCode).toBe(200);

    const over = await patch({ trackingIds: ['r-room', 'r-full'], opened: true, reply: { date: '', message: 'one more' } });
    expectError(over, 409, 'CONFLICT');
    expect(over.json().error.message).toContain('r-full');
    const room = await stored(u, 'r-room');
    expect(room?.replies).toHaveLength(MAX_REPLIES_PER_NOTIFICATION - 2);
    expect(room?.opened).toBeUndefined();
    expect((await stored(u, 'r-full'))?.replies).toHaveLength(MAX_REPLIES_PER_NOTIFICATION);

    // Filling up to the cap exactly is fine; a single request over the cap is malformed (400).
    expect((await patch({ trackingIds: ['r-room'], replies: batch(2, 'last') })).statusCode).toBe(200);
    expect((await stored(u, 'r-room'))?.replies).toHaveLength(MAX_REPLIES_PER_NOTIFICATION);
    await service.store(t.deps.db, input(u, 'r-new'));
    expectError(await patch({ trackingIds: ['r-new'], replies: batch(MAX_REPLIES_PER_NOTIFICATION + 1, 'many') }), 400, 'VALIDATION_FAILED');
    expect((await stored(u, 'r-new'))?.replies).toBeUndefined();
  });

  it(`refuses a reply message over ${MAX_REPLY_BYTES} bytes of UTF-8 with 400, on both routes`, async () => {
    const u = `reply-size-${randomUUID()}`;
    await service.store(t.deps.db, input(u, 's1'));
    for (const { url, headers } of routes(u)) {
      const send = (message: string) => t.app.inject({ method: 'PATCH', url, headers, payload: { trackingIds: ['s1'], reply: { date: '2026-01-15T10:00:00.000Z', message } } });
      expectError(await send('x'.repeat(MAX_REPLY_BYTES + 1)), 400, 'VALIDATION_FAILED');
      // Fewer characters than the bound, more bytes: "é" is two bytes.
      expectError(await send('é'.repeat(MAX_REPLY_BYTES / 2 + 1)), 400, 'VALIDATION_FAILED');
      expect((await send('x'.repeat(MAX_REPLY_BYTES))).statusCode).toBe(200);
    }
    const replies = (await stored(u, 's1'))?.replies as Array<{ message: string }>;
    expect(replies.map((r) => r.message.length)).toEqual([MAX_REPLY_BYTES, MAX_REPLY_BYTES]);
  });
});

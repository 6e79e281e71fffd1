// Deduplication of a notification type on both engines, with the delivery workers: a send with
// the same type, user and content inside the window is accepted (2xx, its own trackingId) and
// skipped DEDUPLICATED (the log says ignored: DEDUPLICATION); 100 identical sends at once make
// exactly one delivery; the window ends on the injected clock; the same Idempotency-Key answers
// the first send's trackingId; a throttled send does not hold the window.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { routed, sendAtOnce, tally } from '../helpers/gated-sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('deduplication (%s)', (kind) => {
  let t: TestContext;
  const clock = new ManualClock(new Date('2026-05-01T12:00:00.000Z'));
  const req = (method: 'GET' | 'POST', url: string, payload?: unknown) =>
    t.app.inject({ method, url, headers: t.auth, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const createType = async (notificationId: string, settings: Record<string, unknown>) => {
    const res = await req('POST', '/types', { notificationId, title: notificationId, channels: ['INAPP_WEB'], ...settings });
    expect(res.statusCode, res.body).toBe(200);
  };
  const send = (type: string, user: string, title = 'Your order shipped', extra: Record<string, unknown> = {}) => ({ type, to: { id: user }, inapp: { title }, parameters: { order: 7 }, ...extra });
  const round = async (payloads: Record<string, unknown>[]) => {
    const ids = await sendAtOnce(t.app, t.auth, payloads);
    return { ids, ...tally(await routed(t.deps, ids), 'DEDUPLICATED') };
  };

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true, clock });
    await createType('shipped', { deduplication: { duration: 600 } });
  });
  afterAll(() => t.close());

  it('delivers one of 100 identical sends at once; the others are accepted with their own trackingIds and logged as deduplicated', async () => {
    const { ids, delivered, skipped } = await round(Array.from({ length: 100 }, () => send('shipped', 'ada')));
    expect({ delivered, skipped }).toEqual({ delivered: 1, skipped: 99 });
    expect(new Set(ids).size).toBe(100);
    const logs = await Promise.all(ids.map(async (id) => (await req('GET', `/logs/${id}`)).json().logs[0] as Record<string, unknown>));
    expect(logs.filter((l) => l.inapp_routing === 'SEND')).toHaveLength(1);
    expect(logs.filter((l) => l.inapp_routing_reason === 'DEDUPLICATED' && l.ignored === 'DEDUPLICATION')).toHaveLength(99);
    const inbox = await t.app.inject({ method: 'GET', url: `/${t.account.clientId}/users/ada/notifications/INAPP_WEB`, headers: { authorization: `Basic ${Buffer.from(`${t.account.clientId}:ada`).toString('base64')}` } });
    expect(inbox.statusCode, inbox.body).toBe(200);
    expect(inbox.json().notifications.filter((n: { title: string }) => n.title === 'Your order shipped')).toHaveLength(1);
  });

  it('delivers other content, another user, another type and the same content after the window', async () => {
    expect(await round([send('shipped', 'bob'), send('shipped', 'bob', 'Your order arrived'), send('shipped', 'bob', 'Your order shipped', { parameters: { order: 8 } })])).toMatchObject({ delivered: 3, skipped: 0 });
    // The same content, and the same under the mergeTags alias: duplicates.
    expect(await round([send('shipped', 'bob'), { type: 'shipped', to: { id: 'bob', email: 'bob@example.com' }, inapp: { title: 'Your order shipped' }, mergeTags: { order: 7 } }])).toMatchObject({ delivered: 0, skipped: 2 });
    clock.advance(600 * 1000 - 1);
    expect(await round([send('shipped', 'bob')])).toMatchObject({ delivered: 0, skipped: 1 });
    clock.advance(1);
    expect(await round([send('shipped', 'bob')])).toMatchObject({ delivered: 1, skipped: 0 });
    // Without deduplication on the type, nothing is deduplicated.
    expect(await round([send('plain', 'bob'), send('plain', 'bob')])).toMatchObject({ delivered: 2, skipped: 0 });
  });

  it('answers a repeated Idempotency-Key with the first trackingId, delivered once', async () => {
    const key = { 'idempotency-key': 'order-9-shipped' };
    const first = await sendAtOnce(t.app, t.auth, [send('shipped', 'cy')], () => key);
    const again = await sendAtOnce(t.app, t.auth, [send('shipped', 'cy'), send('shipped', 'cy')], () => key);
    expect(again).toEqual([first[0], first[0]]);
    expect(tally(await routed(t.deps, first), 'DEDUPLICATED')).toEqual({ delivered: 1, skipped: 0 });
  });

  it('does not let a throttled send hold the window', async () => {
    await createType('both', { deduplication: { duration: 3600 }, throttling: { max: 1, period: 1, unit: 'days', forever: false, scope: ['userId', 'notificationId'] } });
    expect(tally(await routed(t.deps, await sendAtOnce(t.app, t.auth, [send('both', 'dee', 'first')])), 'THROTTLED')).toEqual({ delivered: 1, skipped: 0 });
    // Throttled, so not delivered: the same content again is throttled again, not a duplicate of it.
    const throttled = await routed(t.deps, await sendAtOnce(t.app, t.auth, [send('both', 'dee', 'second')]));
    expect(throttled[0].skipped).toMatchObject({ inapp: 'THROTTLED' });
    expect((await routed(t.deps, await sendAtOnce(t.app, t.auth, [send('both', 'dee', 'second')])))[0].skipped).toMatchObject({ inapp: 'THROTTLED' });
    // A duplicate of the delivered one is deduplicated and not counted by the throttle.
    expect((await routed(t.deps, await sendAtOnce(t.app, t.auth, [send('both', 'dee', 'first')])))[0].skipped).toMatchObject({ inapp: 'DEDUPLICATED' });
    const counter = (await t.deps.db.selectFrom('throttle_counters' as never).select('count' as never).where('counter_key' as never, 'like', '["both"%' as never).executeTakeFirstOrThrow()) as { count: number };
    expect(Number(counter.count)).toBe(3);
  });
});

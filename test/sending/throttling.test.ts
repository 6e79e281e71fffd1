// Throttling of a notification type on both engines, with the delivery workers: at most `max`
// sends per window per scope are delivered, the rest are skipped THROTTLED (the log says
// ignored: THROTTLING); 100 sends at once deliver exactly `max`; windows open and end on the
// injected clock; `forever` never ends.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GateDecisions } from '../../src/modules/sending/send-gates.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { routed, sendAtOnce, tally } from '../helpers/gated-sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const HOUR = 3600 * 1000;

describe.each(STORAGE_KINDS)('throttling (%s)', (kind) => {
  let t: TestContext;
  const clock = new ManualClock(new Date('2026-04-01T08:00:00.000Z'));
  const req = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown) =>
    t.app.inject({ method, url, headers: t.auth, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const createType = async (notificationId: string, throttling: Record<string, unknown>, channels = ['INAPP_WEB']) => {
    const res = await req('POST', '/types', { notificationId, title: notificationId, channels, throttling });
    expect(res.statusCode, res.body).toBe(200);
  };
  const sends = (type: string, users: string[]) => users.map((id, i) => ({ type, to: { id }, inapp: { title: `n${i}` } }));
  /** Sends of `type` to `users` at once, routed: how many were delivered and how many throttled. */
  const round = async (type: string, users: string[]) => tally(await routed(t.deps, await sendAtOnce(t.app, t.auth, sends(type, users))), 'THROTTLED');

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true, clock });
  });
  afterAll(() => t.close());

  it('delivers exactly max of 100 sends at once to one user, and skips the rest THROTTLED', async () => {
    await createType('alerts', { max: 5, period: 1, unit: 'hours', forever: false, scope: ['userId', 'notificationId'] });
    const ids = await sendAtOnce(t.app, t.auth, sends('alerts', Array.from({ length: 100 }, () => 'ada')));
    const result = await routed(t.deps, ids);
    expect(tally(result, 'THROTTLED')).toEqual({ delivered: 5, skipped: 95 });

    const throttled = result.find((m) => m.skipped.inapp === 'THROTTLED')!;
    const [log] = (await req('GET', `/logs/${throttled.trackingId}`)).json().logs;
    expect(log).toMatchObject({ inapp_routing: 'SKIP', inapp_routing_reason: 'THROTTLED', ignored: 'THROTTLING' });
    expect(log.inapp_sent_at).toBeUndefined();
    // Per user: another user has their own five.
    expect(await round('alerts', Array(8).fill('bob'))).toEqual({ delivered: 5, skipped: 3 });
  });

  it('counts per type across users when the scope is notificationId alone', async () => {
    await createType('broadcastish', { max: 3, period: 10, unit: 'minutes', forever: false, scope: ['notificationId'] });
    const ids = await sendAtOnce(t.app, t.auth, sends('broadcastish', Array.from({ length: 20 }, (_, i) => `user-${i}`)));
    expect(tally(await routed(t.deps, ids), 'THROTTLED')).toEqual({ delivered: 3, skipped: 17 });
  });

  it('opens a new window once the last one ended, on the injected clock', async () => {
    await createType('hourly', { max: 2, period: 1, unit: 'hours', forever: false, scope: ['userId'] });
    const first = await sendAtOnce(t.app, t.auth, sends('hourly', ['cy', 'cy', 'cy']));
    expect(tally(await routed(t.deps, first), 'THROTTLED')).toEqual({ delivered: 2, skipped: 1 });
    // Just inside the window: still throttled.
    clock.advance(HOUR - 1);
    expect(await round('hourly', ['cy'])).toEqual({ delivered: 0, skipped: 1 });
    // The window (opened at the first send) has ended: two more.
    clock.advance(1);
    expect(await round('hourly', ['cy', 'cy', 'cy'])).toEqual({ delivered: 2, skipped: 1 });
  });

  it('counts without a window when forever, and a changed period counts afresh', async () => {
    await createType('once', { max: 1, period: 0, unit: 'seconds', forever: true, scope: ['userId', 'notificationId'] });
    expect(await round('once', ['dee', 'dee'])).toEqual({ delivered: 1, skipped: 1 });
    clock.advance(400 * 24 * HOUR);
    expect(await round('once', ['dee'])).toEqual({ delivered: 0, skipped: 1 });
    const patched = await req('PATCH', '/types/once', { throttling: { max: 1, period: 1, unit: 'months', forever: false, scope: ['userId', 'notificationId'] } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(await round('once', ['dee', 'dee'])).toEqual({ delivered: 1, skipped: 1 });
  });

  it('does not count a send that routes to no channel', async () => {
    await createType('quiet', { max: 1, period: 1, unit: 'days', forever: false, scope: ['userId'] }, ['INAPP_WEB', 'EMAIL']);
    // No email address: the only channel with content is skipped NO_EMAIL, nothing is counted.
    const noEmail = await sendAtOnce(t.app, t.auth, [{ type: 'quiet', to: { id: 'eve' }, email: { subject: 's', html: '<p>x</p>' } }]);
    expect((await routed(t.deps, noEmail))[0].skipped).toMatchObject({ email: 'NO_EMAIL' });
    expect(await round('quiet', ['eve', 'eve'])).toEqual({ delivered: 1, skipped: 1 });
  });

  it('gives back what a message whose processing did not commit had counted', async () => {
    await createType('undo', { max: 1, period: 1, unit: 'days', forever: false, scope: ['userId'] });
    const ids = await sendAtOnce(t.app, t.auth, sends('undo', ['fay']));
    await routed(t.deps, ids);
    // Counted once: decided again in a transaction where the message did not move on, then undone.
    const count = async (db = t.deps.db) => Number(((await db.selectFrom('throttle_counters' as never).select('count' as never).where('counter_key' as never, 'like', '["undo"%' as never).executeTakeFirstOrThrow()) as { count: number }).count);
    expect(await count()).toBe(1);
    const at = clock.now().toISOString();
    await t.deps.db.transaction().execute(async (trx) => {
      const gates = await GateDecisions.decide(trx, [
        { trackingId: 'rerun', accountId: t.account.accountId, envId: t.account.clientId, notificationId: 'undo', userId: 'fay', at, body: {}, throttling: { max: 1, period: 1, unit: 'days', forever: false, scope: ['userId'] } },
      ]);
      expect(gates.verdicts.get('rerun')).toBe('THROTTLED');
      expect(await count(trx)).toBe(2);
      await gates.undo(new Set());
    });
    expect(await count()).toBe(1);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { InappTables } from '../../src/modules/inapp/inapp.repository.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const DAY = 86_400_000;

describe.each(STORAGE_KINDS)('scheduled sends (%s)', (kind) => {
  let t: TestContext;
  const send = (payload: unknown) => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
  const log = async (id: string) => (await t.app.inject({ method: 'GET', url: `/logs/${id}`, headers: t.auth })).json().logs[0];
  const inapp = (userId: string) => t.deps.db.withTables<InappTables>().selectFrom('inapp_notifications').selectAll().where('user_id', '=', userId).execute();

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
  });
  afterAll(() => t.close());

  it('holds a future send, lets its body and time change, then delivers the new body', async () => {
    const at = new Date(Date.now() + DAY).toISOString();
    const res = await send({ type: 'reminder', to: { id: 'sched-1' }, inapp: { title: 'old title' }, schedule: at });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json();
    // A send made after it is delivered first: the worker has run, and left the scheduled one alone.
    const now = (await send({ type: 'reminder', to: { id: 'sched-probe' }, inapp: { title: 'now' } })).json().trackingId;
    await eventually(async () => (await log(now)).inapp_delivered_at);
    expect(await log(trackingId)).toMatchObject({ scheduled_for: at });
    expect((await log(trackingId)).processed_at).toBeUndefined();

    const later = new Date(Date.now() + 2 * DAY).toISOString();
    const moved = await t.app.inject({
      method: 'PUT',
      url: `/sender/scheduler/${trackingId}`,
      headers: t.auth,
      payload: { type: 'reminder', to: { id: 'sched-1' }, inapp: { title: 'new title' }, schedule: later },
    });
    expect(moved.statusCode).toBe(200);
    expect(await log(trackingId)).toMatchObject({ scheduled_for: later, schedule_updated_to: later });
    // Its type and recipient were applied at acceptance: repeated unchanged (as above) they pass, changed they are refused and nothing moves.
    for (const [payload, message] of [
      [{ type: 'other-type' }, /type cannot change on a scheduled send: it is "reminder"/],
      [{ notificationId: 'other-type' }, /type cannot change/],
      [{ to: { id: 'someone-else', email: 'else@example.com' } }, /to cannot change on a scheduled send/],
      [{ to: { id: 'sched-1', email: 'new@example.com' } }, /to cannot change/],
      [{ user: { id: 'someone-else' } }, /to cannot change/],
    ] as const) {
      const refused = await t.app.inject({ method: 'PUT', url: `/sender/scheduler/${trackingId}`, headers: t.auth, payload: { ...payload, schedule: new Date(Date.now() + 3 * DAY).toISOString() } });
      expect(refused.statusCode, JSON.stringify(payload)).toBe(400);
      expect(refused.json().error.message).toMatch(message);
    }
    expect(await log(trackingId)).toMatchObject({ scheduled_for: later, user_id: 'sched-1' });
    expect((await t.app.inject({ method: 'GET', url: '/users/someone-else', headers: t.auth })).statusCode).toBe(404);
    expect((await log(trackingId)).schedule_updated_at).toBeDefined();

    // A past time means now.
    const due = await t.app.inject({
      method: 'PUT',
      url: `/sender/scheduler/${trackingId}`,
      headers: t.auth,
      payload: { type: 'reminder', to: { id: 'sched-1' }, schedule: new Date(Date.now() - 1000).toISOString() },
    });
    expect(due.statusCode).toBe(200);
    await eventually(async () => (await log(trackingId)).inapp_delivered_at);
    expect((await inapp('sched-1')).map((n) => n.title)).toEqual(['new title']);

    const tooLate = await t.app.inject({ method: 'DELETE', url: `/sender/scheduler/${trackingId}`, headers: t.auth });
    expect(tooLate.statusCode).toBe(409);
  });

  it('cancels a scheduled send: nothing is delivered and the log says when', async () => {
    const { trackingId } = (await send({ type: 'reminder', to: { id: 'sched-2' }, inapp: { title: 'never' }, schedule: new Date(Date.now() + DAY).toISOString() })).json();
    const del = await t.app.inject({ method: 'DELETE', url: `/sender/scheduler/${trackingId}`, headers: t.auth });
    expect(del.statusCode).toBe(200);
    expect((await log(trackingId)).schedule_deleted_at).toBeDefined();
    const again = await t.app.inject({ method: 'DELETE', url: `/sender/scheduler/${trackingId}`, headers: t.auth });
    expect(again.statusCode).toBe(409);
    const put = await t.app.inject({ method: 'PUT', url: `/sender/scheduler/${trackingId}`, headers: t.auth, payload: { type: 'reminder', to: { id: 'sched-2' } } });
    expect(put.statusCode).toBe(409);
    expect(await inapp('sched-2')).toEqual([]);
  });

  it('answers 404 for an unknown or foreign scheduled send', async () => {
    const { trackingId } = (await send({ type: 'reminder', to: { id: 'sched-3' }, inapp: { title: 'x' }, schedule: new Date(Date.now() + DAY).toISOString() })).json();
    const other = await t.newAccount();
    const res = await t.app.inject({ method: 'DELETE', url: `/sender/scheduler/${trackingId}`, headers: { authorization: `Bearer ${other.apiKey}` } });
    expect(res.statusCode).toBe(404);
    expect((await t.app.inject({ method: 'DELETE', url: '/sender/scheduler/nope', headers: t.auth })).statusCode).toBe(404);
  });
});

// The embedded queue runs on the injected clock, so time can be moved instead of waited for.
// (pg-boss compares with the database server's clock, so this one runs on SQLite only.)
describe('scheduled send fires when its time comes (sqlite, manual clock)', () => {
  let t: TestContext;
  const clock = new ManualClock(new Date());
  beforeAll(async () => {
    t = await createTestContext('sqlite', { workers: true, clock });
  });
  afterAll(() => t.close());

  it('delivers at the scheduled time, not before, and survives a worker restart', async () => {
    const at = new Date(clock.now().getTime() + 3600_000);
    const { trackingId } = (
      await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'timed', to: { id: 'tick' }, inapp: { title: 'on time' }, schedule: at.toISOString() } })
    ).json();
    // Restart the workers: the schedule lives in the database, not in memory.
    await t.workers!.stop();
    const { startWorkers } = await import('../../src/workers.js');
    t.workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10 });

    clock.advance(3599_000);
    const probe = (await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'timed', to: { id: 'probe' }, inapp: { title: 'p' } } })).json().trackingId;
    const log = async (id: string) => (await t.app.inject({ method: 'GET', url: `/logs/${id}`, headers: t.auth })).json().logs[0];
    await eventually(async () => (await log(probe)).inapp_delivered_at);
    expect((await log(trackingId)).processed_at).toBeUndefined();

    clock.advance(2000);
    const record = await eventually(async () => {
      const r = await log(trackingId);
      return r.inapp_delivered_at ? r : undefined;
    });
    expect(new Date(record.processed_at).getTime()).toBeGreaterThanOrEqual(at.getTime());
  });
});

// In-app batching (issue 13, item 4) on both engines: sends of a batching type to one user with
// the same batchingKey value inside batchingWindow become one in-app notification, updated in
// place and rendered with the template's batch copy over `_count` and `_items`; each send's log
// names the notification it went into. The window runs on a clock the test moves.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { batchCopyRenderer } from '../../src/modules/inapp/inapp.batching.js';
import { inappExecutor } from '../../src/modules/sending/executors/inapp.js';
import type { DeliverInput } from '../../src/modules/sending/executors/types.js';
import { RenderPool } from '../../src/rendering/render-pool.js';
import { type TestContext, ManualClock, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const WINDOW_MS = 60_000;
const BATCH_COPY = {
  title: '{{ _count }} new comments on {{ post }}: {% for item in _items %}{{ item.by }}{% unless forloop.last %}, {% endunless %}{% endfor %}',
  redirectURL: 'https://app.example/posts/{{ postId }}',
  imageURL: 'https://app.example/{{ _count }}.png',
};

interface Notification {
  id: string;
  title: string;
  seen: boolean;
  redirectURL?: string;
  imageURL?: string;
  date: string;
  parameters?: { _count?: number; _items?: Record<string, unknown>[] } & Record<string, unknown>;
}

describe.each(STORAGE_KINDS)('in-app batching (%s)', (kind) => {
  let t: TestContext;
  const clock = new ManualClock(new Date('2026-03-02T09:00:00.000Z'));
  const req = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) => t.app.inject({ method, url, headers: t.auth, ...(payload ? { payload } : {}) });

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true, clock });
    const batching = { enabled: true, batching: true, batchingKey: 'parameters.postId', batchingWindow: WINDOW_MS };
    for (const [id, instant] of [['comment', batching], ['plain', { enabled: true }]] as const) {
      const created = await req('POST', '/types', { notificationId: id, title: id, channels: ['INAPP_WEB'], options: { INAPP_WEB: { defaultDeliveryOption: 'instant', instant } } });
      expect(created.statusCode, created.body).toBe(200);
      const template = await req('POST', `/notifications/${id}/INAPP_WEB/templates`, { templateId: 'main', title: '{{ by }} commented on {{ post }}', redirectURL: 'https://app.example/c/{{ commentId }}', batch: BATCH_COPY });
      expect(template.statusCode, template.body).toBe(200);
    }
  });
  const renders = new RenderPool({ size: 1 });
  afterAll(async () => {
    await renders.close();
    await t.close();
  });

  const send = async (type: string, userId: string, parameters: Record<string, unknown>): Promise<string> => {
    const res = await req('POST', '/send', { type, to: { id: userId }, parameters });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ trackingId: string }>().trackingId;
  };
  /** The send's log once its in-app delivery is recorded. */
  const deliveredLog = (trackingId: string) =>
    eventually(async () => {
      const log = (await req('GET', `/logs/${trackingId}`)).json<{ logs: Record<string, unknown>[] }>().logs[0];
      return log?.inapp_delivered_at ? log : undefined;
    }, 15_000, `in-app delivery of ${trackingId}`);
  const inbox = async (userId: string): Promise<Notification[]> => {
    const res = await req('GET', `/user/inapp?userId=${encodeURIComponent(userId)}&count=100`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ notifications: Notification[] }>().notifications;
  };
  /** The inbox once one of its notifications shows `title` (batch copies are written after their send's commit). */
  const copyWritten = (userId: string, title: string | RegExp) =>
    eventually(async () => {
      const notifications = await inbox(userId);
      return notifications.some((n) => (typeof title === 'string' ? n.title === title : title.test(n.title))) ? notifications : undefined;
    }, 15_000, `batch copy "${String(title)}" for ${userId}`);

  it('puts sends with the same key inside the window into one notification, updated in place with the batch copy', async () => {
    const userId = `ada-${randomUUID()}`;
    const first = await send('comment', userId, { postId: 'p1', post: 'Launch', by: 'Bob', commentId: 'c1' });
    const firstLog = await deliveredLog(first);
    expect(firstLog).toMatchObject({ inapp_batch_id: first, inapp_batch_count: 1, inapp_preview: 'Bob commented on Launch' });
    // One send: the send's own (instant) copy.
    expect(await inbox(userId)).toMatchObject([{ id: first, title: 'Bob commented on Launch', redirectURL: 'https://app.example/c/c1', parameters: { _count: 1 } }]);

    // The user reads it; two more comments come in inside the window.
    expect((await req('PATCH', `/user/inapp?userId=${userId}`, { trackingIds: [first], opened: true })).statusCode).toBe(200);
    await t.services.inapp.markSeen({ accountId: t.account.accountId, envId: t.account.clientId, userId });
    clock.advance(20_000);
    const second = await send('comment', userId, { postId: 'p1', post: 'Launch', by: 'Cy', commentId: 'c2' });
    expect(await deliveredLog(second)).toMatchObject({ inapp_batch_id: first, inapp_batch_count: 2 });
    clock.advance(WINDOW_MS - 20_000 - 1);
    const third = await send('comment', userId, { postId: 'p1', post: 'Launch', by: 'Di', commentId: 'c3' });
    expect(await deliveredLog(third)).toMatchObject({ inapp_batch_id: first, inapp_batch_count: 3, inapp_preview: 'Di commented on Launch' });

    // The batch copy is rendered once the send is committed (which the log shows), then written.
    const [batch, ...others] = await copyWritten(userId, '3 new comments on Launch: Bob, Cy, Di');
    expect(others).toEqual([]);
    expect(batch).toMatchObject({
      id: first,
      title: '3 new comments on Launch: Bob, Cy, Di',
      redirectURL: 'https://app.example/posts/p1',
      imageURL: 'https://app.example/3.png',
      // A new item makes the batch unread again, dated now.
      seen: false,
      date: clock.now().toISOString(),
    });
    expect(batch.parameters!._count).toBe(3);
    expect(batch.parameters!._items!.map((item) => item.by)).toEqual(['Bob', 'Cy', 'Di']);
    expect((batch as unknown as { opened?: string }).opened).toBeUndefined();
    expect((await req('GET', `/user/inapp/unread?userId=${userId}`)).json()).toEqual({ count: 1 });
  });

  it('opens a new notification once the window has passed, and keeps different keys and users apart', async () => {
    const userId = `bea-${randomUUID()}`;
    const other = `cal-${randomUUID()}`;
    const a1 = await send('comment', userId, { postId: 'p1', post: 'One', by: 'A' });
    const b1 = await send('comment', userId, { postId: 'p2', post: 'Two', by: 'B' });
    const o1 = await send('comment', other, { postId: 'p1', post: 'One', by: 'O' });
    for (const id of [a1, b1, o1]) await deliveredLog(id);
    clock.advance(WINDOW_MS);
    // The window of a1's batch has closed: this send opens the next batch of key p1.
    const a2 = await send('comment', userId, { postId: 'p1', post: 'One', by: 'E' });
    expect(await deliveredLog(a2)).toMatchObject({ inapp_batch_id: a2, inapp_batch_count: 1 });
    const a3 = await send('comment', userId, { postId: 'p1', post: 'One', by: 'F' });
    expect(await deliveredLog(a3)).toMatchObject({ inapp_batch_id: a2, inapp_batch_count: 2 });
    const b2 = await send('comment', userId, { postId: 'p2', post: 'Two', by: 'G' });
    expect(await deliveredLog(b2)).toMatchObject({ inapp_batch_id: b2, inapp_batch_count: 1 });

    const byId = new Map((await copyWritten(userId, '2 new comments on One: E, F')).map((n) => [n.id, n]));
    expect([...byId.keys()].sort()).toEqual([a1, a2, b1, b2].sort());
    expect(byId.get(a1)).toMatchObject({ title: 'A commented on One', parameters: { _count: 1 } });
    expect(byId.get(a2)).toMatchObject({ title: '2 new comments on One: E, F', parameters: { _count: 2 } });
    expect(byId.get(b1)).toMatchObject({ title: 'B commented on Two' });
    expect(await inbox(other)).toMatchObject([{ id: o1, title: 'O commented on One' }]);
  });

  it('gives every send its own notification when the type does not batch', async () => {
    const userId = `dan-${randomUUID()}`;
    const sent = [await send('plain', userId, { postId: 'p1', post: 'X', by: 'A' }), await send('plain', userId, { postId: 'p1', post: 'X', by: 'B' })];
    for (const id of sent) {
      const log = await deliveredLog(id);
      expect(log.inapp_batch_id).toBeUndefined();
    }
    const notifications = await inbox(userId);
    expect(notifications.map((n) => n.id).sort()).toEqual([...sent].sort());
    expect(notifications.map((n) => n.title).sort()).toEqual(['A commented on X', 'B commented on X']);
  });

  it('batches inline in-app content, showing the latest send when there is no batch copy', async () => {
    const userId = `eve-${randomUUID()}`;
    const ids: string[] = [];
    for (const by of ['A', 'B']) {
      const res = await req('POST', '/send', { type: 'comment', to: { id: userId }, parameters: { postId: 'p9', by }, inapp: { title: '{{ by }} wrote' } });
      ids.push(res.json<{ trackingId: string }>().trackingId);
      await deliveredLog(ids.at(-1)!);
    }
    expect(await inbox(userId)).toMatchObject([{ id: ids[0], title: 'B wrote', parameters: { _count: 2, by: 'B' } }]);
  });

  it('makes 20 concurrent sends of one key one notification with a count of 20', async () => {
    const userId = `fay-${randomUUID()}`;
    const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => send('comment', userId, { postId: 'hot', post: 'Hot', by: `u${i}` })));
    const logs = await Promise.all(sent.map(deliveredLog));
    const [notification, ...others] = await copyWritten(userId, /^20 new comments on Hot: /);
    expect(others).toEqual([]);
    expect(new Set(logs.map((l) => l.inapp_batch_id))).toEqual(new Set([notification.id]));
    expect(sent).toContain(notification.id);
    // Every send counted once: its place in the batch, 1 to 20.
    expect(logs.map((l) => l.inapp_batch_count).sort((a, b) => Number(a) - Number(b))).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(notification.parameters!._count).toBe(20);
    expect(notification.title).toMatch(/^20 new comments on Hot: /);
    expect(new Set(notification.parameters!._items!.map((item) => item.by))).toEqual(new Set(Array.from({ length: 20 }, (_, i) => `u${i}`)));
  });

  it('counts 20 deliveries in concurrent transactions into one batch, each once, and a retried delivery not again', async () => {
    const userId = `gus-${randomUUID()}`;
    const inapp = t.services.inapp;
    const batch = { key: 'k', windowMs: WINDOW_MS, template: BATCH_COPY };
    const input = (trackingId: string, i: number) => ({ accountId: t.account.accountId, envId: t.account.clientId, userId, trackingId, notificationId: 'comment', title: `u${i} commented`, parameters: { by: `u${i}`, post: 'P', postId: 'k' }, batch });
    const ids = Array.from({ length: 20 }, () => randomUUID());
    // Each in a transaction of its own: on PostgreSQL, 20 connections racing for the same key.
    const results = await Promise.all(ids.map((id, i) => inapp.transaction((trx) => inapp.storeBatched(trx, input(id, i)))));
    const batchId = results[0].batchId;
    expect(results.every((r) => r.batchId === batchId && r.joined)).toBe(true);
    expect(ids).toContain(batchId);
    expect(results.map((r) => r.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));

    const again = await inapp.transaction((trx) => inapp.storeBatched(trx, input(ids[7], 7)));
    expect(again).toEqual({ batchId, count: results[7].count, joined: false });
    // Counted, not yet rendered: the batch shows the copy it had (the opening send's own).
    const opener = ids.findIndex((id) => id === batchId);
    expect(await inbox(userId)).toMatchObject([{ id: batchId, title: `u${opener} commented`, parameters: { _count: 20 } }]);
    expect(results.map((r) => r.pendingCopy === undefined)).toEqual(results.map((r) => r.count === 1));

    // The copies rendered after the commits, all at once: only the one counting all 20 is written.
    const scope = { accountId: t.account.accountId, envId: t.account.clientId, userId };
    const render = batchCopyRenderer(renders);
    const writes = await Promise.all(results.map((r) => (r.pendingCopy ? inapp.writeBatchCopy(scope, r.pendingCopy, render) : Promise.resolve(null))));
    expect(writes.map((w, i) => w?.written ?? `opened ${results[i].count}`).sort()).toEqual([...Array.from({ length: 18 }, () => false), 'opened 1', true]);
    expect(writes.find((w) => w?.written)).toEqual({ written: true });
    const [notification, ...others] = await inbox(userId);
    expect(others).toEqual([]);
    expect(notification).toMatchObject({ id: batchId, parameters: { _count: 20 } });
    expect(notification.title).toMatch(/^20 new comments on P: /);
  });

  it('batches a delivery run as a job of its own (its own transaction) the same way, once per send', async () => {
    const userId = `hal-${randomUUID()}`;
    // Whose turn each render asked for at the render threads (the pool takes tenants in turns).
    const tenants: (string | undefined)[] = [];
    const recording: Pick<typeof renders, 'render'> = {
      render: (channel, content, context, options) => {
        tenants.push(options?.tenant);
        return renders.render(channel, content, context, options);
      },
    };
    const executor = inappExecutor(t.services.inapp, recording);
    const batching = { key: 'job', windowMs: WINDOW_MS, template: BATCH_COPY };
    const input = (trackingId: string, by: string) =>
      ({
        delivery: {} as DeliverInput['delivery'],
        message: { account_id: t.account.accountId, env_id: t.account.clientId, user_id: userId, tracking_id: trackingId, notification_id: 'comment', sub_notification_id: null } as DeliverInput['message'],
        content: { title: `${by} commented`, batching },
        body: { parameters: { by, post: 'Job', postId: 'job' } } as DeliverInput['body'],
      }) satisfies DeliverInput;
    const first = await executor.deliver(input('job-1', 'A'));
    const second = await executor.deliver(input('job-2', 'B'));
    // A retried job of the second send changes nothing.
    expect(await executor.deliver(input('job-2', 'B'))).toEqual(second);
    expect(first).toMatchObject({ result: { providerMessageId: 'job-1' }, delivered: true, extra: { inapp_batch_id: 'job-1', inapp_batch_count: 1 } });
    expect(second).toMatchObject({ result: { providerMessageId: 'job-1' }, extra: { inapp_batch_id: 'job-1', inapp_batch_count: 2 } });
    expect(await inbox(userId)).toMatchObject([{ id: 'job-1', title: '2 new comments on Job: A, B', parameters: { _count: 2 } }]);
    // The batch copy rendered in the account's turn, not in a shared anonymous one.
    expect(tenants).toEqual([t.account.accountId]);
  });

  it("shows the latest send's own copy when the batch copy fails to render, and says why", async () => {
    const userId = `ivy-${randomUUID()}`;
    const executor = inappExecutor(t.services.inapp, renders);
    const batching = { key: 'bad', windowMs: WINDOW_MS, template: { title: '{{ _count | no_such_filter }}' } };
    const input = (trackingId: string, by: string) =>
      ({
        delivery: {} as DeliverInput['delivery'],
        message: { account_id: t.account.accountId, env_id: t.account.clientId, user_id: userId, tracking_id: trackingId, notification_id: 'comment', sub_notification_id: null } as DeliverInput['message'],
        content: { title: `${by} commented`, batching },
        body: { parameters: { by } } as DeliverInput['body'],
      }) satisfies DeliverInput;
    await executor.deliver(input(`${userId}-1`, 'A'));
    expect(await executor.deliver(input(`${userId}-2`, 'B'))).toMatchObject({ delivered: true, extra: { inapp_batch_count: 2 } });
    expect(await inbox(userId)).toMatchObject([{ id: `${userId}-1`, title: 'B commented', parameters: { _count: 2 } }]);

    const scope = { accountId: t.account.accountId, envId: t.account.clientId, userId };
    const third = await t.services.inapp.transaction((trx) => t.services.inapp.storeBatched(trx, { ...scope, trackingId: `${userId}-3`, notificationId: 'comment', title: 'C commented', batch: batching }));
    expect(await t.services.inapp.writeBatchCopy(scope, third.pendingCopy!, batchCopyRenderer(renders))).toEqual({ written: true, error: expect.stringMatching(/^batch\.title: .*no_such_filter/) });
    expect(await inbox(userId)).toMatchObject([{ title: 'C commented', parameters: { _count: 3 } }]);
  });

  it('keeps _items within its size budget: the latest send always, older ones while they fit', async () => {
    const userId = `jo-${randomUUID()}`;
    const scope = { accountId: t.account.accountId, envId: t.account.clientId, userId };
    const inapp = t.services.inapp;
    const batch = { key: 'big', windowMs: WINDOW_MS };
    const store = (i: number, chars: number) =>
      inapp.transaction((trx) => inapp.storeBatched(trx, { ...scope, trackingId: `${userId}-${i}`, notificationId: 'comment', title: `${i}`, parameters: { i, text: 'x'.repeat(chars) }, batch }));
    // 100,000 characters each: the latest two fit in 256 KiB, a third would not.
    for (let i = 1; i <= 4; i++) await store(i, 100_000);
    let [shown] = await inbox(userId);
    expect(shown.parameters!._count).toBe(4);
    expect(shown.parameters!._items!.map((item) => item.i)).toEqual([3, 4]);
    // One send over the budget alone is still there, as the latest.
    await store(5, 300_000);
    [shown] = await inbox(userId);
    expect(shown.parameters!._items!.map((item) => item.i)).toEqual([5]);
    // Small ones again: up to MAX_BATCH_ITEMS (50) of them, the big one left out once it no longer fits.
    for (let i = 6; i <= 8; i++) await store(i, 10);
    [shown] = await inbox(userId);
    expect(shown.parameters!._items!.map((item) => item.i)).toEqual([6, 7, 8]);
  });

  it('refuses batching settings it cannot honour, and reads accepted ones back as sent', async () => {
    const inapp = (instant: Record<string, unknown>) => ({ notificationId: `v-${randomUUID()}`, title: 'v', channels: ['INAPP_WEB'], options: { INAPP_WEB: { defaultDeliveryOption: 'instant', instant: { enabled: true, ...instant } } } });
    const refused: [Record<string, unknown>, string][] = [
      [{ batching: true, batchingKey: 'parameters.postId' }, 'options.INAPP_WEB.instant.batchingWindow is missing'],
      [{ batching: true, batchingKey: 'parameters.postId | downcase', batchingWindow: 1000 }, 'options.INAPP_WEB.instant.batchingKey'],
      [{ batching: true, batchingKey: '{% if x %}a{% endif %}', batchingWindow: 1000 }, 'options.INAPP_WEB.instant.batchingKey'],
      [{ batching: true, batchingWindow: 32 * 24 * 3600_000 }, 'at most'],
    ];
    for (const [instant, text] of refused) {
      const body = inapp(instant);
      const res = await req('POST', '/types', body);
      expect(res.statusCode, JSON.stringify(instant)).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
      expect(res.json().error.message).toContain(text);
      expect((await req('GET', `/types/${body.notificationId}`)).statusCode).toBe(404);
    }
    for (const instant of [{ batching: true, batchingWindow: 1 }, { batching: true, batchingKey: "{{ parameters['post id'] }}", batchingWindow: 3600_000 }, { batching: false, batchingKey: 'anything | at all' }]) {
      const body = inapp(instant);
      const res = await req('POST', '/types', body);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().options).toEqual(body.options);
    }
  });
});

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type PushEndpoint, type TestSubscription, startPushEndpoint } from '../helpers/push-endpoint.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('send: web push end to end (%s)', (kind) => {
  let t: TestContext;
  let push: PushEndpoint;
  // Held still: the TTL counts from the send, so the first attempt carries the whole TTL only when no time passes.
  const clock = new ManualClock(new Date());
  const send = (payload: unknown) => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] ? log(trackingId) : undefined), 15_000, field);
  const identify = (id: string, subs: TestSubscription[]) =>
    t.app.inject({ method: 'POST', url: `/users/${id}`, headers: t.auth, payload: { id, webPushTokens: subs.map((s) => ({ sub: s.sub })) } });
  const user = async (id: string) => (await t.app.inject({ method: 'GET', url: `/users/${id}`, headers: t.auth })).json();
  const attempts = async (trackingId: string) =>
    (
      await sql<{ outcome: string; provider_code: string | null }>`
        select a.outcome, a.provider_code from delivery_attempts a join deliveries d on d.id = a.delivery_id
        where d.tracking_id = ${trackingId} and d.channel = 'web_push' order by a.attempt`.execute(t.deps.db)
    ).rows;

  beforeAll(async () => {
    push = await startPushEndpoint();
    t = await createTestContext(kind, { workers: true, clock, config: { allowPrivateNetworks: true, webPushTtlSeconds: 7200, webPushUrgency: 'high' } });
  });
  afterAll(async () => {
    await t.close();
    await push.close();
  });

  it('encrypts the rendered content to the subscription and logs web_push_sent_*', async () => {
    const browser = push.subscribe();
    expect((await identify('wp-ada', [browser])).statusCode).toBe(200);
    const res = await send({
      type: 'shipping',
      to: { id: 'wp-ada' },
      parameters: { order: 42 },
      web_push: { title: 'Order {{ order }} shipped', message: 'On its way', icon: 'https://cdn.example.com/i.png', url: 'https://shop.example.com/o/{{ order }}' },
    });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json();
    const record = await settled(trackingId, 'web_push_sent_at');
    expect(record).toMatchObject({ web_push_routing: 'SEND', web_push_preview: 'Order 42 shipped', web_push_sent_token: browser.sub.endpoint });
    expect(record.web_push_sent_after).toBeGreaterThanOrEqual(0);
    expect(record.web_push_failed_at).toBeUndefined();

    const received = push.accepted().filter((r) => r.subscriptionId === browser.id);
    expect(received).toHaveLength(1);
    expect(received[0].json()).toEqual({ title: 'Order 42 shipped', message: 'On its way', icon: 'https://cdn.example.com/i.png', url: 'https://shop.example.com/o/42' });
    expect(received[0]).toMatchObject({ ttl: 7200, urgency: 'high' });
    expect(received[0].topic).toMatch(/^[A-Za-z0-9_-]{32}$/);

    // The JWT is signed with the environment's VAPID key, the one browsers subscribe with.
    const settings = (await t.app.inject({ method: 'GET', url: '/settings/push/web', headers: t.auth })).json();
    expect(received[0].vapidKey).toBe(settings.publicKey);
  });

  it('fans out to every subscription: one gone is removed and reported, the other is sent', async () => {
    const live = push.subscribe();
    const dead = push.subscribe();
    push.answer(dead, 410);
    await identify('wp-two', [live, dead]);
    const { trackingId } = (await send({ type: 'fanout', to: { id: 'wp-two' }, web_push: { title: 'Hello', message: 'Two browsers' } })).json();
    const record = await settled(trackingId, 'web_push_sent_at');
    expect(record.web_push_sent_token).toBe(live.sub.endpoint);
    expect(record.web_push_failed_token).toBe(dead.sub.endpoint);
    expect(record.web_push_failed_at).toBeDefined();
    expect(record.web_push_failed_internal).toContain('410');
    expect(record.web_push_failed_internal).toContain('removed');
    expect(push.accepted().filter((r) => r.subscriptionId === live.id).map((r) => r.json())).toEqual([{ title: 'Hello', message: 'Two browsers' }]);
    expect(push.received.filter((r) => r.subscriptionId === dead.id).map((r) => r.status)).toEqual([410]);

    const stored = await user('wp-two');
    expect(stored.webPushTokens).toEqual([{ sub: live.sub }]);
  });

  it('fails when every subscription is gone, removes them, and routes the next send away', async () => {
    const dead = push.subscribe();
    push.answer(dead, 404);
    await identify('wp-gone', [dead]);
    const { trackingId } = (await send({ type: 'gone', to: { id: 'wp-gone' }, web_push: { title: 'Anyone?', message: 'x' } })).json();
    const record = await settled(trackingId, 'web_push_failed_at');
    expect(record.web_push_failed_code).toBe('SUBSCRIPTION_GONE');
    expect(record.web_push_failed_internal).toContain(dead.sub.endpoint);
    expect(record.web_push_sent_at).toBeUndefined();
    expect((await attempts(trackingId)).map((a) => a.outcome)).toEqual(['failed']);
    expect((await user('wp-gone')).webPushTokens).toBeUndefined();

    const next = (await send({ type: 'gone', to: { id: 'wp-gone' }, web_push: { title: 'Anyone?', message: 'x' } })).json();
    const skipped = await settled(next.trackingId, 'processed_at');
    expect(skipped).toMatchObject({ web_push_routing: 'SKIP', web_push_routing_reason: 'NO_WEB_PUSH_SUBSCRIPTION' });
  });

  it('retries a 429 after Retry-After and then delivers', async () => {
    const browser = push.subscribe();
    push.answer(browser, 429, { times: 2, retryAfter: '0' });
    await identify('wp-busy', [browser]);
    const { trackingId } = (await send({ type: 'busy', to: { id: 'wp-busy' }, web_push: { title: 'Eventually', message: 'x' } })).json();
    const record = await settled(trackingId, 'web_push_sent_at');
    expect(record.web_push_sent_token).toBe(browser.sub.endpoint);
    expect(await attempts(trackingId)).toEqual([
      { outcome: 'retry', provider_code: '429' },
      { outcome: 'retry', provider_code: '429' },
      { outcome: 'success', provider_code: null },
    ]);
    expect(push.received.filter((r) => r.subscriptionId === browser.id).map((r) => r.status)).toEqual([429, 429, 201]);
    // Every attempt of one delivery carries the same Topic, so a push service keeps one copy.
    expect(new Set(push.received.filter((r) => r.subscriptionId === browser.id).map((r) => r.topic)).size).toBe(1);
  });

  it('fails at once on another 4xx', async () => {
    const browser = push.subscribe();
    push.answer(browser, 403);
    await identify('wp-403', [browser]);
    const { trackingId } = (await send({ type: 'forbidden', to: { id: 'wp-403' }, web_push: { title: 'No', message: 'x' } })).json();
    const record = await settled(trackingId, 'web_push_failed_at');
    expect(record.web_push_failed_code).toBe('VAPID_REJECTED');
    expect(await attempts(trackingId)).toEqual([{ outcome: 'failed', provider_code: '403' }]);
    expect((await user('wp-403')).webPushTokens).toEqual([{ sub: browser.sub }]);
  });
});

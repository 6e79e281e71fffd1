// Templates that run into the render limits fail their channel with TEMPLATE_RENDER_FAILED and
// the reason in the log, and they render off the event loop that serves the API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('render bounds (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
  });
  afterAll(() => t.close());

  const send = async (title: string, parameters: Record<string, unknown> = {}) => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'render_bounds', to: { id: 'rb-user' }, parameters, inapp: { title } } });
    expect(res.statusCode).toBe(200);
    return res.json().trackingId as string;
  };
  const failure = (trackingId: string) =>
    eventually(async () => {
      const l = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0];
      return l?.inapp_failed_at ? l : undefined;
    }, 20_000, `render failure of ${trackingId}`);

  /** Longest the event loop went without running a 10 ms timer while `work` ran. */
  const longestStall = async (work: () => Promise<unknown>) => {
    let longest = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
    }, 10);
    try {
      await work();
    } finally {
      clearInterval(timer);
    }
    return longest;
  };

  it('fails nested loops over literal ranges at the render limit without stalling the event loop', async () => {
    let trackingId = '';
    const stall = await longestStall(async () => {
      trackingId = await send('{% for a in (1..100000) %}{% for b in (1..100000) %}x{% endfor %}{% endfor %}');
      await failure(trackingId);
    });
    const log = await failure(trackingId);
    expect(log.inapp_failed_code).toBe('TEMPLATE_RENDER_FAILED');
    expect(log.inapp_failed_internal).toMatch(/^title: .*render limit exceeded/);
    // The render runs for the whole render limit (2 s); on the event loop it stalled it that long.
    expect(stall).toBeLessThan(1000);
  });

  it('fails nested loops over a parameter', async () => {
    const items = Array.from({ length: 1000 }, (_, i) => i);
    const log = await failure(await send('{% for a in items %}{% for b in items %}{% for c in items %}{{ a }}{{ b }}{% endfor %}{% endfor %}{% endfor %}', { items }));
    expect(log.inapp_failed_code).toBe('TEMPLATE_RENDER_FAILED');
    expect(log.inapp_failed_internal).toMatch(/render limit exceeded/);
  });

  it('refuses output over the output bound, and doubling strings at the memory limit', async () => {
    const big = await failure(await send('{% for i in (1..300000) %}xxxxxxxxxx{% endfor %}'));
    expect(big.inapp_failed_code).toBe('TEMPLATE_RENDER_FAILED');
    expect(big.inapp_failed_internal).toContain('rendered output is 3000000 characters, over the limit of 2000000');
    const doubled = await failure(await send('{% assign s = "xxxxxxxxxx" %}{% for i in (1..30) %}{% assign s = s | append: s %}{% endfor %}{{ s }}'));
    expect(doubled.inapp_failed_code).toBe('TEMPLATE_RENDER_FAILED');
    expect(doubled.inapp_failed_internal).toMatch(/memory alloc limit exceeded/);
  });

  it('still renders ordinary content', async () => {
    const trackingId = await send('Hello {{ name | upcase }}', { name: 'ada' });
    const log = await eventually(async () => {
      const l = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0];
      return l?.inapp_delivered_at ? l : undefined;
    }, 20_000, 'delivered');
    expect(log.inapp_preview).toBe('Hello ADA');
  });
});

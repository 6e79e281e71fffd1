import { afterAll, describe, expect, it } from 'vitest';
import { batchingKeyPath, batchingKeyProblem, batchingKeyValue } from '../../src/modules/inapp/batching-key.js';
import { batchCopyRenderer, batchingOf, planBatch, renderBatchCopy } from '../../src/modules/inapp/inapp.batching.js';
import { RenderPool } from '../../src/rendering/render-pool.js';

const notification = { notificationId: 'comment', title: 'Bob commented', parameters: { postId: 'p1', n: 7, tags: ['a', 'b'], 'post id': 'spaced', nested: { id: 3 }, empty: null } };

describe('in-app batching key', () => {
  it('reads a path into the notification, bare or in {{ }}, as the React client does', () => {
    expect(batchingKeyValue('parameters.postId', notification)).toBe('p1');
    expect(batchingKeyValue('{{ parameters.postId }}', notification)).toBe('p1');
    expect(batchingKeyValue('{{parameters.n}}', notification)).toBe('7');
    expect(batchingKeyValue('parameters.tags[1]', notification)).toBe('b');
    expect(batchingKeyValue("parameters['post id']", notification)).toBe('spaced');
    expect(batchingKeyValue('parameters.nested', notification)).toBe('{"id":3}');
    expect(batchingKeyValue('notificationId', notification)).toBe('comment');
  });

  it('answers "" for what is absent (those sends batch together) and never reads a prototype', () => {
    expect(batchingKeyValue(undefined, notification)).toBe('');
    expect(batchingKeyValue('parameters.missing', notification)).toBe('');
    expect(batchingKeyValue('parameters.empty', notification)).toBe('');
    expect(batchingKeyValue('parameters.postId.length', notification)).toBe('');
    expect(batchingKeyValue('parameters.constructor', notification)).toBe('');
    expect(batchingKeyValue('parameters.__proto__', notification)).toBe('');
  });

  it('stores a long value as its SHA-256, the same for the same value', () => {
    const long = { parameters: { postId: 'x'.repeat(500) } };
    const value = batchingKeyValue('parameters.postId', long);
    expect(value).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(batchingKeyValue('parameters.postId', { parameters: { postId: 'x'.repeat(500) } })).toBe(value);
  });

  it('refuses what is not a path', () => {
    expect(batchingKeyPath(' {{ parameters.postId }} ')).toBe('parameters.postId');
    for (const key of ['parameters.postId | downcase', '{% if a %}b{% endif %}', 'a..b', '.a', '1abc', 'a b', '{{ }}']) {
      expect(batchingKeyProblem(key), key).toContain('is not a path');
    }
  });
});

describe('in-app batch plan and copy', () => {
  // Render threads as the server has them; and ones with a short deadline for the test of what LiquidJS cannot stop.
  const pool = new RenderPool({ size: 1 });
  const renderer = batchCopyRenderer(pool);
  const shortDeadline = new RenderPool({ size: 1, deadlineMs: 200 });
  afterAll(() => Promise.all([pool.close(), shortDeadline.close()]));

  it('is on only with batching and a window', () => {
    expect(batchingOf(undefined)).toBeNull();
    expect(batchingOf({ defaultDeliveryOption: 'instant', instant: { enabled: true, batching: false, batchingWindow: 5 } })).toBeNull();
    expect(batchingOf({ defaultDeliveryOption: 'instant', instant: { enabled: true, batching: true, batchingWindow: 5 } })).toEqual({ windowMs: 5 });
    const user = { id: 'u', email: 'u@example.com', properties: { plan: 'pro' }, slackToken: { access_token: 'xoxb-secret' }, pushTokens: [{ token: 't' }] };
    // Only what a copy shows of the recipient is kept with the delivery: never a token.
    expect(planBatch({ batchingKey: 'parameters.postId', windowMs: 5 }, notification, { template: { title: 't' }, user })).toEqual({
      key: 'p1',
      windowMs: 5,
      template: { title: 't' },
      user: { id: 'u', email: 'u@example.com', properties: { plan: 'pro' } },
    });
    // A batch copy that is not strings is ignored (the latest send's copy is shown).
    expect(planBatch({ windowMs: 5 }, notification, { template: { title: 3 } })).toEqual({ key: '', windowMs: 5 });
  });

  it('renders the batch copy over _count, _items, the latest parameters and the user', async () => {
    const plan = { key: 'p1', windowMs: 5, template: { title: '{{ _count }} by {{ user.name }}: {{ _items | map: "by" | join: "+" }} ({{ by }})', redirectURL: '/p/{{ postId }}', imageURL: '' }, user: { name: 'Ada' } };
    const { copy, error } = await renderBatchCopy(renderer, plan, { title: 'latest' }, { parameters: { by: 'C', postId: 'p1' }, items: [{ by: 'A' }, { by: 'B' }, { by: 'C' }], count: 4 });
    expect(error).toBeUndefined();
    expect(copy).toEqual({ title: '4 by Ada: A+B+C (C)', redirectURL: '/p/p1' });
  });

  it('falls back to the latest copy, saying why, when the batch copy cannot render', async () => {
    const plan = { key: '', windowMs: 5, template: { title: '{% for i in (1..100000000) %}{{ i }}{% endfor %}' } };
    const latest = { title: 'latest', redirectURL: '/x' };
    const { copy, error } = await renderBatchCopy(renderer, plan, latest, { parameters: {}, items: [], count: 2 });
    expect(copy).toBe(latest);
    expect(error).toMatch(/batch\.title/);
    expect((await renderBatchCopy(renderer, { key: '', windowMs: 5 }, latest, { parameters: {}, items: [], count: 2 })).copy).toBe(latest);
  });

  it('keeps to the batch limits on the render thread: output size and memory', async () => {
    const latest = { title: 'latest' };
    const long = await renderBatchCopy(renderer, { key: '', windowMs: 5, template: { title: '{{ s }}' } }, latest, { parameters: { s: 'x'.repeat(10_001) }, items: [], count: 2 });
    expect(long).toMatchObject({ copy: latest, error: expect.stringMatching(/batch\.title/) });
    const ok = await renderBatchCopy(renderer, { key: '', windowMs: 5, template: { title: '{{ s }}' } }, latest, { parameters: { s: 'x'.repeat(10_000) }, items: [], count: 2 });
    expect(ok.copy.title).toHaveLength(10_000);
  });

  it('ends a filter chain that runs past the LiquidJS limits (checked only between tags) at the render deadline', async () => {
    // Each sort of 100,000 items stays under the memory limit, and one output tag is never
    // interrupted by the render-time limit: only terminating the thread ends it.
    const sorts = Array.from({ length: 8 }, (_, i) => `sort: "${i % 2 ? 'n' : 'by'}"`).join(' | ');
    const arr = Array.from({ length: 100_000 }, (_, i) => ({ by: `u${(i * 7919) % 100_000}`, n: (i * 104_729) % 100_000 }));
    const latest = { title: 'latest' };
    const render = batchCopyRenderer(shortDeadline);
    const { copy, error } = await renderBatchCopy(render, { key: '', windowMs: 5, template: { title: `{{ arr | ${sorts} | size }}` } }, latest, { parameters: { arr }, items: [], count: 2 });
    expect(copy).toBe(latest);
    expect(error).toBe('rendering took longer than 200 ms');
    // The pool replaced the thread: the next copy renders.
    expect((await renderBatchCopy(render, { key: '', windowMs: 5, template: { title: '{{ _count }} new' } }, latest, { parameters: {}, items: [], count: 3 })).copy).toEqual({ title: '3 new' });
  });
});

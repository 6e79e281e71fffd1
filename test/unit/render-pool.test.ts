import { afterAll, describe, expect, it } from 'vitest';
import { TemplateRenderError } from '../../src/rendering/liquid.js';
import { RENDER_YOUNG_GENERATION_MB, RenderPool } from '../../src/rendering/render-pool.js';
import { eventually } from '../helpers/wait.js';

describe('RenderPool', () => {
  const pool = new RenderPool({ size: 1, deadlineMs: 300 });
  afterAll(() => pool.close());

  it('renders channel content on a thread, components included', async () => {
    const out = await pool.render('EMAIL', { subject: 'Hi {{ name }}', html: "<p>{{ name }}</p>{% component 'footer' %}", internal: 'dropped' }, { name: '<Ada>' }, {
      resolveComponents: async (ids) => Object.fromEntries(ids.map((id) => [id, `<footer>${id} {{ name | upcase }}</footer>`])),
    });
    expect(out).toEqual({ subject: 'Hi <Ada>', html: '<p>&lt;Ada&gt;</p><footer>footer &lt;ADA&gt;</footer>' });
  });

  it('reports template errors as TemplateRenderError naming the field', async () => {
    const err = await pool.render('INAPP_WEB', { title: '{{ x | nosuchfilter }}' }, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TemplateRenderError);
    expect((err as Error).message).toMatch(/^title: .*nosuchfilter/);
    const missing = await pool.render('EMAIL', { html: "{% component 'gone' %}" }, {}, { resolveComponents: async () => ({}) }).catch((e: unknown) => e);
    expect((missing as Error).message).toContain("component 'gone' does not exist");
  });

  it('fails a render past its deadline and replaces the thread for the renders queued behind it', async () => {
    const slow = pool.render('INAPP_WEB', { title: '{% for a in (1..100000) %}{% for b in (1..100000) %}x{% endfor %}{% endfor %}' }, {});
    const next = pool.render('INAPP_WEB', { title: 'after {{ n }}' }, { n: 1 });
    const err = await slow.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TemplateRenderError);
    expect((err as Error).message).toBe('rendering took longer than 300 ms');
    expect(await next).toEqual({ title: 'after 1' });
  });

  it('runs its threads with a young generation of RENDER_YOUNG_GENERATION_MB and the heap cap it was given', async () => {
    const bounded = new RenderPool({ size: 1, maxHeapMb: 64 });
    try {
      await bounded.render('INAPP_WEB', { title: '{{ n }}' }, { n: 1 });
      expect(bounded.threadLimits).toEqual([expect.objectContaining({ maxYoungGenerationSizeMb: RENDER_YOUNG_GENERATION_MB, maxOldGenerationSizeMb: 64 })]);
    } finally {
      await bounded.close();
    }
  });

  it('takes waiting renders in turns between tenants, in order within each', async () => {
    const tenants = new RenderPool({ size: 1 });
    try {
      const done: string[] = [];
      const render = (tenant: string, n: number) =>
        tenants.render('INAPP_WEB', { title: `{{ t }}{{ n }}` }, { t: tenant, n }, { tenant }).then((out) => done.push(out.title));
      // Three of A's renders wait for the one thread before B's: B's goes second, not fourth.
      await Promise.all([render('A', 1), render('A', 2), render('A', 3), render('B', 1)]);
      expect(done).toEqual(['A1', 'B1', 'A2', 'A3']);
    } finally {
      await tenants.close();
    }
  });

  it('refuses renders once closed', async () => {
    const closed = new RenderPool({ size: 1 });
    await closed.close();
    await expect(closed.render('INAPP_WEB', { title: 'x' }, {})).rejects.toThrow('closed');
  });
});

describe('RenderPool threads at rest', () => {
  it('lets a thread without a job go after idleMs, and starts one for the next render', async () => {
    const pool = new RenderPool({ size: 1, idleMs: 20 });
    try {
      expect(pool.threadCount).toBe(0);
      expect(await pool.render('INAPP_WEB', { title: 'one {{ n }}' }, { n: 1 })).toEqual({ title: 'one 1' });
      await eventually(() => pool.threadCount === 0, 10_000, 'the idle render thread to exit');
      const again = pool.render('INAPP_WEB', { title: 'two {{ n }}' }, { n: 2 });
      expect(pool.threadCount).toBe(1);
      expect(await again).toEqual({ title: 'two 2' });
    } finally {
      await pool.close();
    }
  });

  it('keeps its threads by default between renders', async () => {
    const pool = new RenderPool({ size: 1 });
    try {
      await pool.render('INAPP_WEB', { title: '{{ n }}' }, { n: 1 });
      await new Promise((r) => setImmediate(r));
      expect(pool.threadCount).toBe(1);
    } finally {
      await pool.close();
    }
  });
});

describe('RenderPool with content that cannot reach a thread', () => {
  it('fails that render alone', async () => {
    const pool = new RenderPool({ size: 1 });
    try {
      await expect(pool.render('INAPP_WEB', { title: 'x' }, { f: () => 1 })).rejects.toThrow(/could not be cloned/);
      expect(await pool.render('INAPP_WEB', { title: 'ok {{ n }}' }, { n: 2 })).toEqual({ title: 'ok 2' });
    } finally {
      await pool.close();
    }
  });
});

import { describe, expect, it } from 'vitest';
import { renderChannelContent } from '../../src/rendering/content.js';
import {
  DEFAULT_LIMITS,
  LiquidRenderer,
  TemplateRenderError,
  buildRenderContext,
} from '../../src/rendering/liquid.js';

/** One renderer with the default limits, as the services object and each render thread hold. */
const renderer = new LiquidRenderer();
const renderText = renderer.renderText.bind(renderer);
const renderEmailHtml = renderer.renderEmailHtml.bind(renderer);

const ctx = buildRenderContext({ name: 'Ada <Lovelace>', items: ['a', 'b', 'c'], vip: true, n: 3 }, { id: 'u1', email: 'ada@example.com' });

async function failure(p: Promise<unknown>): Promise<TemplateRenderError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TemplateRenderError);
  return err as TemplateRenderError;
}

describe('Liquid renderer', () => {
  it('renders parameters and the recipient under user', async () => {
    expect(await renderText('Hi {{ name }} ({{ user.email }}, {{ user.id }})', ctx)).toBe('Hi Ada <Lovelace> (ada@example.com, u1)');
  });

  it('applies filters, if and for', async () => {
    expect(await renderText('{{ name | upcase | truncate: 6 }}', ctx)).toBe('ADA...');
    expect(await renderText('{% if vip %}VIP{% else %}regular{% endif %}', ctx)).toBe('VIP');
    expect(await renderText('{% for i in items %}{{ i }}{% unless forloop.last %},{% endunless %}{% endfor %}', ctx)).toBe('a,b,c');
    expect(await renderText('{{ n | plus: 2 }} {{ missing | default: "none" }}', ctx)).toBe('5 none');
  });

  it('renders unknown variables as empty text instead of failing', async () => {
    expect(await renderText('[{{ nothing }}][{{ user.phone }}][{{ a.b.c }}]', ctx)).toBe('[][][]');
  });

  it('does not expose prototype properties', async () => {
    expect(await renderText('[{{ user.constructor }}][{{ items.constructor }}]', ctx)).toBe('[][]');
  });

  it('escapes values in email html but not in text', async () => {
    expect(await renderEmailHtml('<p>{{ name }}</p>', ctx)).toBe('<p>Ada &lt;Lovelace&gt;</p>');
    expect(await renderEmailHtml('<p>{{ name | raw }}</p>', ctx)).toBe('<p>Ada <Lovelace></p>');
    expect(await renderText('{{ name }}', ctx)).toBe('Ada <Lovelace>');
  });

  it('fails with TEMPLATE_RENDER_FAILED on an unknown filter', async () => {
    const err = await failure(renderText('{{ name | shout }}', ctx, 'subject'));
    expect(err.code).toBe('TEMPLATE_RENDER_FAILED');
    expect(err.field).toBe('subject');
    expect(err.message).toContain('subject: undefined filter: shout');
  });

  it('fails with TEMPLATE_RENDER_FAILED on a syntax error', async () => {
    const err = await failure(renderText('{% if name %}unclosed', ctx));
    expect(err.code).toBe('TEMPLATE_RENDER_FAILED');
    expect(err.message).toMatch(/not closed/);
  });

  it('refuses include, render and layout (no file system)', async () => {
    for (const tag of ["{% include 'x' %}", "{% render '/etc/passwd' %}", "{% layout 'base' %}"]) {
      const err = await failure(renderText(tag, ctx));
      expect(err.message).toContain('is not available');
    }
  });

  it('stops a runaway loop at the render time limit', async () => {
    const renderer = new LiquidRenderer({ ...DEFAULT_LIMITS, renderLimit: 50, memoryLimit: Number.MAX_SAFE_INTEGER });
    const started = Date.now();
    const err = await failure(renderer.renderText('{% for i in (1..100000) %}{% for j in (1..100000) %}x{% endfor %}{% endfor %}', ctx));
    expect(err.message).toContain('template render limit exceeded');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('stops huge ranges at the memory limit and huge output at the output limit', async () => {
    expect((await failure(renderText('{% for i in (1..1000000000) %}x{% endfor %}', ctx))).message).toContain('memory alloc limit exceeded');
    const small = new LiquidRenderer({ ...DEFAULT_LIMITS, maxOutputChars: 100 });
    expect((await failure(small.renderText('{% for i in (1..200) %}x{% endfor %}', ctx))).message).toContain('over the limit of 100');
    expect(await small.renderText('{% for i in (1..100) %}x{% endfor %}', ctx)).toHaveLength(100);
  });

  it('renders a component in place, in the same scope, with escaping', async () => {
    const asked: string[][] = [];
    const resolver = async (ids: string[]) => {
      asked.push(ids);
      return { header: '<h1>Hello {{ user.email }} {{ name }}</h1>', footer: '<footer>bye</footer>' };
    };
    const html = await renderEmailHtml("{% component 'header' %}<p>body</p>{% component \"footer\" %}{% component 'header' %}", ctx, resolver);
    expect(html).toBe(
      '<h1>Hello ada@example.com Ada &lt;Lovelace&gt;</h1><p>body</p><footer>bye</footer><h1>Hello ada@example.com Ada &lt;Lovelace&gt;</h1>',
    );
    expect(asked).toEqual([['header', 'footer']]);
  });

  it('fails when a component is unknown, nested, or given without a quoted id', async () => {
    expect((await failure(renderEmailHtml("{% component 'nope' %}", ctx, async () => ({})))).message).toContain("component 'nope' does not exist");
    expect((await failure(renderEmailHtml("{% component 'a' %}", ctx, async () => ({ a: "{% component 'b' %}" })))).message).toContain('cannot be nested');
    expect((await failure(renderEmailHtml('{% component header %}', ctx, async () => ({})))).message).toContain('one quoted component id');
    // Components are an email html feature only.
    expect((await failure(renderText("{% component 'header' %}", ctx))).message).toContain('component');
  });

  it('reports the components an html source uses (check) and caches parses', () => {
    const renderer = new LiquidRenderer();
    expect(renderer.check("{% if x %}{% component 'a' %}{% endif %}{% component 'b' %}{% component 'a' %}", { html: true }).componentIds).toEqual(['a', 'b']);
    // A cache hit still reports the ids.
    expect(renderer.check("{% if x %}{% component 'a' %}{% endif %}{% component 'b' %}{% component 'a' %}", { html: true }).componentIds).toEqual(['a', 'b']);
    expect(() => renderer.check('{{ x | nope }}')).toThrow(TemplateRenderError);
  });

  it('renders every string of a channel content object, deeply', async () => {
    const email = await renderChannelContent(
      'EMAIL',
      { subject: 'Hi {{ name }}', html: "<b>{{ name }}</b>{% component 'f' %}", previewText: '{{ user.email }}', internal: '{"editor":"{{ x | nope }}"}' },
      ctx,
      { renderer, resolveComponents: async () => ({ f: '<i>{{ n }}</i>' }) },
    );
    expect(email).toEqual({ subject: 'Hi Ada <Lovelace>', html: '<b>Ada &lt;Lovelace&gt;</b><i>3</i>', previewText: 'ada@example.com' });

    const slack = await renderChannelContent(
      'SLACK',
      {
        text: 'For {{ user.id }}',
        blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '*{{ name }}*' }, fields: [{ text: '{{ n }}' }], count: 2, flag: true }],
      },
      ctx,
      { renderer },
    );
    expect(slack).toEqual({
      text: 'For u1',
      blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '*Ada <Lovelace>*' }, fields: [{ text: '3' }], count: 2, flag: true }],
    });

    const err = await failure(renderChannelContent('SLACK', { text: 'ok', blocks: [{ text: { text: '{{ x | nope }}' } }] }, ctx, { renderer }));
    expect(err.field).toBe('blocks[0].text.text');
  });
});

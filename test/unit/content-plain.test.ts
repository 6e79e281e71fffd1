// Content without a `{` is rendered without a parse (RenderPool skips its threads for it): the
// result must be what the Liquid render gives, and anything a render would refuse goes to it.
import { describe, expect, it } from 'vitest';
import { contentWithoutTemplates, renderChannelContent } from '../../src/rendering/content.js';
import { DEFAULT_LIMITS, LiquidRenderer } from '../../src/rendering/liquid.js';
import { RenderPool } from '../../src/rendering/render-pool.js';

describe('content without templates', () => {
  const renderer = new LiquidRenderer();
  const plain = [
    ['EMAIL', { subject: 'Your order shipped', html: '<h1>Hello</h1><p>Track it &amp; more</p>', previewText: 'soon', internal: { editor: 1 }, senderName: undefined }],
    ['INAPP_WEB', { title: 'Hi', url: 'https://example.com/a?b=c', instant: { title: 'x', n: 3, on: true, none: null }, batch: [{ a: 'b' }, 'c'] }],
    ['SLACK', { text: 'hello', blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '*bold*' } }] }],
  ] as const;

  it('gives what the Liquid render gives', async () => {
    for (const [channel, content] of plain) {
      const expected = await renderChannelContent(channel, content, {}, { renderer });
      expect(contentWithoutTemplates(channel, content)).toEqual(expected);
    }
  });

  it('leaves to the render whatever may hold a template or is past a limit', () => {
    expect(contentWithoutTemplates('EMAIL', { subject: 'Hi {{ name }}', html: '<p>x</p>' })).toBeNull();
    expect(contentWithoutTemplates('EMAIL', { subject: 'Hi', html: "<p>{% component 'f' %}</p>" })).toBeNull();
    expect(contentWithoutTemplates('SLACK', { blocks: [{ text: { text: 'a {{ b }}' } }] })).toBeNull();
    const limits = { ...DEFAULT_LIMITS, maxOutputChars: 10 };
    expect(contentWithoutTemplates('EMAIL', { html: '<p>longer than ten</p>' }, limits)).toBeNull();
    let deep: Record<string, unknown> = { text: 'bottom' };
    for (let i = 0; i < 25; i++) deep = { nested: deep };
    expect(contentWithoutTemplates('INAPP_WEB', { title: 'x', deep })).toBeNull();
  });

  it('is a copy: changing the result leaves the content alone', () => {
    const content = { title: 'x', instant: { title: 'y' } };
    const out = contentWithoutTemplates('INAPP_WEB', content)!;
    out.instant.title = 'changed';
    expect(content.instant.title).toBe('y');
  });

  it('the render pool answers plain content without a thread, and still renders templates on one', async () => {
    const pool = new RenderPool({ size: 1 });
    try {
      expect(await pool.render('INAPP_WEB', { title: 'plain', internal: 'dropped' }, {})).toEqual({ title: 'plain' });
      expect((pool as unknown as { threads: unknown[] }).threads).toHaveLength(0);
      expect(await pool.render('INAPP_WEB', { title: 'hi {{ n }}' }, { n: 2 })).toEqual({ title: 'hi 2' });
      expect((pool as unknown as { threads: unknown[] }).threads).toHaveLength(1);
    } finally {
      await pool.close();
    }
  });
});

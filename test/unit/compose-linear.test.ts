import { describe, expect, it } from 'vitest';
import { applyTracking, rewriteAnchors, withPreheader } from '../../src/channels/email/compose.js';

/**
 * The link rewrite and the preheader run on the delivery worker's thread, on HTML a sender
 * controls up to 2,000,000 characters. Inputs that made the former regular expressions
 * quadratic (a 300 KB body of `<a <a <a ...` held the process 14 s; 2 MB would be about ten
 * minutes) must come out right at that size, well inside the test's limit.
 */
describe('email HTML rewrites on hostile input', () => {
  const link = (url: string) => `https://t.example/c?u=${encodeURIComponent(url)}`;
  const opens = '<a '.repeat(660_000);

  it('rewrites the one link after 2 MB of unclosed <a starts, and leaves an HTML without > as it is', () => {
    const html = `${opens}href="https://a.example/">A</a>`;
    const out = applyTracking(html, { link });
    expect(out).toBe(`${opens}href="${link('https://a.example/')}">A</a>`);
    expect(applyTracking(opens, { link })).toBe(opens);
  });

  it('stays linear when quotes never close or no > follows a value', () => {
    const unclosed = '<a href="x> '.repeat(150_000);
    expect(applyTracking(`${unclosed}`, { link })).toBe(unclosed);
    const noEnd = `<a href="https://a.example/">A</a>${'<a href="https://b.example/"'.repeat(60_000)}`;
    const out = applyTracking(noEnd, { link });
    expect(out.startsWith(`<a href="${link('https://a.example/')}">A</a><a href="https://b.example/"`)).toBe(true);
    expect(out.length - noEnd.length).toBe(link('https://a.example/').length - 'https://a.example/'.length);
  });

  it('puts the preheader first when 2 MB of <body starts never end, after <body ...> when one does', () => {
    const bodies = '<body '.repeat(330_000);
    expect(withPreheader(bodies, 'Hi').indexOf('class="preheader"')).toBe(5);
    expect(withPreheader('<html><body class="x"><p>a</p></body></html>', 'Hi')).toMatch(/^<html><body class="x"><div class="preheader"[^>]*>Hi/);
  });

  it('keeps what the expression matched: a > inside the value, the first href of a tag, either quote', () => {
    const seen: [string, string, string][] = [];
    const out = rewriteAnchors(`<p><a title=t href='https://x.example/?a>b' data-k="v">x</a><A HREF="/rel" href="https://y.example/">y</A><abbr href="https://z.example/">`, (head, value, tail) => {
      seen.push([head, value, tail]);
      return value.startsWith('https:') ? `T(${value})` : undefined;
    });
    expect(seen).toEqual([
      ["<a title=t href=", 'https://x.example/?a>b', ' data-k="v">'],
      ['<A HREF=', '/rel', ' href="https://y.example/">'],
    ]);
    expect(out).toBe(`<p><a title=t href="T(https://x.example/?a&gt;b)" data-k="v">x</a><A HREF="/rel" href="https://y.example/">y</A><abbr href="https://z.example/">`);
  });
});

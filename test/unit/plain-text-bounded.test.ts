import { describe, expect, it } from 'vitest';
import { PLAIN_TEXT_MAX_HTML, convertibleLength, htmlToPlainText } from '../../src/channels/email/plain-text.js';

/**
 * The text part of an email is read from its HTML (html-to-text) on the delivery worker's event
 * loop, per send and per broadcast recipient, from HTML the sender controls up to 2,000,000
 * characters. HTML on which html-to-text or its parser is far worse than linear must convert in
 * bounded time (a table, a prefix of the document), and ordinary HTML to the same text as before.
 */

/** A newsletter: layout tables, headings, links, an image, a small data table and a list. */
const NEWSLETTER = [
  '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Weekly digest</title><style>body{margin:0}.btn{color:#fff}</style></head>',
  '<body style="margin:0;background:#f4f4f4"><table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center">',
  '<table role="presentation" width="600" style="background:#ffffff"><tr><td style="padding:24px;font-family:Helvetica,Arial,sans-serif">',
  '<a href="https://news.example.com/?utm_source=newsletter&amp;utm_campaign=weekly"><img src="https://cdn.example.com/logo.png" width="120" alt="Example"></a>',
  '<h1>This week at Example</h1>',
  '<p>Hello Ada, here is what happened this week. We shipped new features, fixed bugs and wrote about all of it on the blog.</p>',
  '<h2>How we made the dashboard faster</h2>',
  '<p>We measured every request, found the slow queries and <strong>rewrote</strong> them: pages load in half the time. ',
  '<a href="https://news.example.com/stories/1?utm_source=newsletter&amp;utm_medium=email&amp;utm_content=story-1">Read the full story</a></p>',
  '<h3>Plans</h3>',
  '<table cellpadding="4"><thead><tr><th>Plan</th><th>Price</th><th>Seats</th></tr></thead><tbody>',
  '<tr><td>Free</td><td>$0</td><td>1</td></tr><tr><td>Team</td><td>$12 / month</td><td>10</td></tr><tr><td>Business</td><td>$49 / month</td><td>Unlimited</td></tr>',
  '</tbody></table>',
  '<ul><li>Cancel at any time</li><li>Annual billing saves 20%</li><li><a href="https://example.com/pricing">https://example.com/pricing</a></li></ul>',
  '<p style="font-size:12px;color:#888888">You receive this because you subscribed at example.com. ',
  '<a href="https://example.com/unsubscribe?u=abcdef0123456789&amp;l=weekly">Unsubscribe</a> | <a href="https://example.com/preferences">Preferences</a></p>',
  '</td></tr></table></td></tr></table></body></html>',
].join('');

/** Its text part as the code before the bounds made it (html-to-text with the same options, unbounded). */
const NEWSLETTER_TEXT = [
  'https://news.example.com/?utm_source=newsletter&utm_campaign=weekly',
  '',
  '',
  'This week at Example',
  '',
  'Hello Ada, here is what happened this week. We shipped new',
  'features, fixed bugs and wrote about all of it on the blog.',
  '',
  '',
  'How we made the dashboard faster',
  '',
  'We measured every request, found the slow queries and',
  'rewrote them: pages load in half the time. Read the full',
  'story',
  '[https://news.example.com/stories/1?utm_source=newsletter&utm_medium=email&utm_content=story-1]',
  '',
  '',
  'Plans',
  '',
  'PLAN       PRICE         SEATS',
  'Free       $0            1',
  'Team       $12 / month   10',
  'Business   $49 / month   Unlimited',
  '',
  ' * Cancel at any time',
  ' * Annual billing saves 20%',
  ' * https://example.com/pricing',
  '',
  'You receive this because you subscribed at example.com.',
  'Unsubscribe',
  '[https://example.com/unsubscribe?u=abcdef0123456789&l=weekly]',
  '| Preferences [https://example.com/preferences]',
].join('\n');

const longestLine = (text: string) => Math.max(...text.split('\n').map((line) => line.length));

describe('the text part of an email, read from its HTML in bounded time', () => {
  it('reads an ordinary newsletter to the same text as before', () => {
    expect(htmlToPlainText(NEWSLETTER)).toBe(NEWSLETTER_TEXT);
  });

  it('reads a long ordinary newsletter whole, to the text of all of it', () => {
    // Some 240 KB: past what the quick bound lets through unparsed, so read by the metering parse.
    const content = NEWSLETTER.slice(NEWSLETTER.indexOf('>', NEWSLETTER.indexOf('<body')) + 1, NEWSLETTER.indexOf('</body>'));
    const long = `<html><body>${content.repeat(140)}</body></html>`;
    expect(long.length).toBeGreaterThan(200_000);
    const text = htmlToPlainText(long);
    expect(text.split('PLAN       PRICE         SEATS').length).toBe(141);
    expect(text.endsWith('| Preferences [https://example.com/preferences]')).toBe(true);
  });

  it('lays a table out in columns within the layout budget, and one line per row past it', () => {
    expect(htmlToPlainText('<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>22</td></tr></table>')).toBe('A   B\n1   22');

    // html-to-text transposes a square of the table's larger side: 2,000 columns are 4,000,000
    // cells, past the budget (1,000,000), so the row's cells follow one another, wrapped.
    const wide = htmlToPlainText(`<table><tr>${'<td>a</td>'.repeat(2000)}</tr></table>`);
    expect(wide.replace(/\s+/g, '')).toBe('a'.repeat(2000));
    expect(longestLine(wide)).toBeLessThanOrEqual(100);

    const tall = htmlToPlainText(`<table><tr><th>x</th><th>y</th></tr>${'<tr><td>a</td><td>b</td></tr>'.repeat(1500)}</table>`);
    expect(tall.split('\n')).toEqual(['X Y', ...Array<string>(1500).fill('a b')]);
  });

  it('reads a cell whose span the layout cannot take as text: a fraction, a negative or over 1,000', () => {
    // Each made html-to-text's layout throw (its row offsets recursed until the stack overflowed),
    // or loop over the span: 63 bytes with colspan="100000" took 30 s.
    for (const span of ['rowspan="1.5"', 'rowspan="-1"', 'colspan="100000"']) {
      expect(htmlToPlainText(`<table><tr><td ${span}>x</td><td>y</td></tr></table>`), span).toBe('x y');
    }
  });

  it('converts only as much of a hostile HTML as the budget allows, its text ending with a line "..."', () => {
    const hostile = {
      // The parser looked through the 5,000 open <b> for each </i>: 25,000,000 comparisons.
      'end tags of elements not open': `${'<b>'.repeat(5000)}${'</i>'.repeat(5000)}x`,
      // One word of 40,000 letters, each from an element of its own: copied again at each one.
      'a word glued from 40,000 elements': `<p>${'<b>a</b>'.repeat(40_000)}</p>`,
      // Each level of quote rewrites all of the text inside it.
      'text 60 quotes deep': `${'<blockquote>'.repeat(60)}${'lorem ipsum '.repeat(30_000)}`,
    };
    for (const [what, html] of Object.entries(hostile)) {
      expect(htmlToPlainText(html).endsWith('\n\n...'), what).toBe(true);
      expect(convertibleLength(html), what).toBeLessThan(html.length);
    }
  });

  it("reads a bounded prefix of the audit's send: a one-row table of 180,000 cells (1.8 MB)", () => {
    // Ordinary HTML is read whole.
    expect(convertibleLength(NEWSLETTER)).toBe(NEWSLETTER.length);
    const html = `<table><tr>${'<td>a</td>'.repeat(180_000)}</tr></table>`;
    const read = convertibleLength(html);
    expect(read).toBeLessThan(PLAIN_TEXT_MAX_HTML);
    expect(read).toBeLessThan(html.length / 10);
    // A sanity bound only, far from what it takes (some tens of ms): unbounded it held the event loop 87 s.
    const started = performance.now();
    const text = htmlToPlainText(html);
    expect(performance.now() - started).toBeLessThan(5000);
    expect(text.startsWith('a a a a')).toBe(true);
    expect(text.endsWith('\n\n...')).toBe(true);
    expect(longestLine(text)).toBeLessThanOrEqual(100);
  });
});

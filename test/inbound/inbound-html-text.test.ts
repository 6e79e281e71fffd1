// The text of inbound mail without a text part (HTML only): read from its HTML in bounded time.
// mailparser made it with html-to-text, unbounded, on the event loop: an 8.7 MB message of one
// table held the SMTP transaction, and every other request, 184 s.
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INBOUND_BODY_MAX_CHARS } from '../../src/modules/addresses/inbound.service.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const DOMAIN = 'in.clarion.test';
const TO = `support@${DOMAIN}`;

const htmlOnly = (html: string) => `From: Ada <ada@example.com>\r\nTo: ${TO}\r\nSubject: hi\r\nMIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n${html}\r\n`;

/** A newsletter: headings, links, an image, a small table and a list. */
const NEWSLETTER = [
  '<html><body><table width="600"><tr><td>',
  '<a href="https://news.example.com/?utm_source=newsletter&amp;utm_campaign=weekly"><img src="https://cdn.example.com/logo.png" alt="Example"></a>',
  '<h1>This week at Example</h1>',
  '<p>Hello Ada, here is what happened this week. We shipped new features, fixed bugs and wrote about all of it on the blog.</p>',
  '<h2>How we made the dashboard faster</h2>',
  '<p>We measured every request and <strong>rewrote</strong> the slow ones. <a href="https://news.example.com/stories/1">Read the full story</a></p>',
  '<table><tr><th>Plan</th><th>Price</th></tr><tr><td>Free</td><td>$0</td></tr><tr><td>Team</td><td>$12 / month</td></tr></table>',
  '<ul><li>Cancel at any time</li><li><a href="https://example.com/pricing">Compare plans</a></li></ul>',
  '</td></tr></table></body></html>',
].join('\n');

describe.each(STORAGE_KINDS)('the text of inbound HTML-only mail (%s)', (kind) => {
  let t: TestContext;

  beforeAll(async () => {
    t = await createTestContext(kind, { config: { inboundDomain: DOMAIN } });
    expect((await t.app.inject({ method: 'POST', url: '/addresses', headers: t.auth, payload: { prefix: 'support' } })).statusCode).toBe(200);
  });
  afterAll(() => t.close());

  /** The log fields recorded for a message to TO. */
  async function receive(raw: string): Promise<Record<string, unknown>> {
    const recipient = await t.services.inbound.findRecipient(TO);
    const [row] = await t.services.inbound.receive(Buffer.from(raw), [recipient!]);
    return JSON.parse(row.fields) as Record<string, unknown>;
  }

  it('reads an ordinary HTML-only message to the text mailparser made of it', async () => {
    const raw = htmlOnly(NEWSLETTER);
    // The options the parse had before: mailparser's text of the HTML, html-to-text's defaults.
    const before = await simpleParser(Buffer.from(raw), { skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true });
    const fields = await receive(raw);
    expect(fields.email_inbound_body_text).toBe(before.text);
    expect(fields.email_inbound_body_text).toContain('THIS WEEK AT EXAMPLE');
    expect(fields.email_inbound_body_text).toContain('Read the full story\n[https://news.example.com/stories/1]');
    expect(fields.email_inbound_body_html).toBe(before.html);
  });

  it('keeps the text part of a message that has one', async () => {
    const raw = [
      `From: ada@example.com\r\nTo: ${TO}\r\nSubject: both\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary="b"\r\n\r\n`,
      '--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe plain words.\r\n',
      '--b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>The <b>HTML</b> words.</p>\r\n--b--\r\n',
    ].join('');
    const fields = await receive(raw);
    expect(fields.email_inbound_body_text).toBe('The plain words.');
    expect(fields.email_inbound_body_html).toBe('<p>The <b>HTML</b> words.</p>');
  });

  it('keeps a message whose HTML html-to-text throws on, without a text', async () => {
    // Roman numerals past 9,999 (html-to-text has none): the message is kept, not refused with a 451 the sender would retry.
    const fields = await receive(htmlOnly('<ol type="I" start="10000"><li>x</li></ol>'));
    expect(fields.email_inbound_body_text).toBeUndefined();
    expect((fields.email_inbound_body_html as string).trim()).toBe('<ol type="I" start="10000"><li>x</li></ol>');
  });

  it('reads only as much of a hostile HTML-only message as converts within the budget, its text ending with "..."', async () => {
    // 30,000 rows (870 KB): one word of 60,000 letters, each cell copying it again.
    const fields = await receive(htmlOnly(`<table>${'<tr><td>a</td><td>b</td></tr>'.repeat(30_000)}</table>`));
    const text = fields.email_inbound_body_text as string;
    expect(text.endsWith('\n\n...')).toBe(true);
    expect(text.length).toBeLessThan(60_000);
    expect(text.startsWith('abab')).toBe(true);
  });

  it("records the audit's 8.7 MB message of one table in bounded time", async () => {
    const raw = htmlOnly(`<table>${'<tr><td>a</td><td>b</td></tr>'.repeat(300_000)}</table>`);
    expect(raw.length).toBeGreaterThan(8_700_000);
    // A sanity bound only, far from what it takes (well under a second): unbounded, 184 s.
    const started = performance.now();
    const fields = await receive(raw);
    expect(performance.now() - started).toBeLessThan(5000);
    expect((fields.email_inbound_body_text as string).endsWith('\n\n...')).toBe(true);
    expect((fields.email_inbound_body_html as string).length).toBe(INBOUND_BODY_MAX_CHARS);
  });
});

import type Mail from 'nodemailer/lib/mailer/index.js';
import { encodeWord } from 'nodemailer/lib/mime-funcs/index.js';
import type { EmailMessage, EmailTracking } from '../types.js';
import { type AttachmentFetchOptions, type ResolvedAttachment, resolveAttachments } from './attachments.js';
import { type PlainTextCache, htmlToPlainText } from './plain-text.js';

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/**
 * The preview text as a hidden block at the very start of the body, where mail clients read
 * their inbox preview from. Zero-width fillers after it keep the client from pulling body text
 * into the preview when the preview text is short.
 */
export function preheaderHtml(previewText: string): string {
  const filler = '&#847;&zwnj;&nbsp;'.repeat(Math.max(0, 90 - previewText.length));
  return (
    '<div class="preheader" style="display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden;mso-hide:all;color:transparent">' +
    `${escapeHtml(previewText)}${filler}</div>`
  );
}

/** Puts the preheader first in the body (right after `<body>` when the HTML is a full document). */
export function withPreheader(html: string, previewText: string | undefined): string {
  if (!previewText) return html;
  const block = preheaderHtml(previewText);
  const body = /<body\b/i.exec(html);
  // The tag's end by indexOf, not `[^>]*>` in the pattern: retried at every `<body` of an HTML
  // without a `>` after it, that scan was quadratic in the HTML's length.
  const end = body ? html.indexOf('>', body.index) : -1;
  if (end >= 0) return html.slice(0, end + 1) + block + html.slice(end + 1);
  return block + html;
}

const ANCHOR_START = /<a\b/gi;
/** An href attribute up to its value's opening quote, inside a start tag's text. */
const HREF_ATTRIBUTE = /\shref\s*=\s*(["'])/i;
const ATTRIBUTE = (name: string) => new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)')`, 'i');
const LINK_TAGS = ATTRIBUTE('data-link-tags');
const NO_TRACK = /\sdata-(?:clarion-)?no-track\b/i;

const decodeEntities = (s: string) =>
  s.replace(/&(?:amp|#38|#x26);/gi, '&').replace(/&(?:quot|#34);/gi, '"').replace(/&(?:#39|apos);/gi, "'").replace(/&lt;/gi, '<').replace(/&gt;/gi, '>');

/**
 * `data-link-tags="campaign:spring;button:cta"` as {campaign: ['spring'], button: ['cta']}
 * (the shape of the SDK's clickedLinkTags); undefined without tags.
 */
export function parseLinkTags(value: string | undefined): Record<string, string[]> | undefined {
  if (!value) return undefined;
  const tags: Record<string, string[]> = {};
  for (const pair of decodeEntities(value).split(';')) {
    const colon = pair.indexOf(':');
    const name = (colon < 0 ? pair : pair.slice(0, colon)).trim();
    if (!name) continue;
    const tagValue = colon < 0 ? '' : pair.slice(colon + 1).trim();
    (tags[name] ??= []).push(tagValue);
  }
  return Object.keys(tags).length > 0 ? tags : undefined;
}

/**
 * Rewrites the quoted href of every `<a>` start tag with what `replace(head, value, tail)`
 * returns (undefined leaves the tag as it is); the value comes back double-quoted and escaped.
 * `head` is the tag up to the value's opening quote, `tail` from after its closing quote to the
 * tag's `>`. The href must start before the tag's first `>`; its value may hold one.
 *
 * A scan with indexOf rather than one regular expression over the document: retried at every
 * `<a`, the pattern's `[^>]*?` ran to the next `>` each time, quadratic in the HTML (a 300 KB
 * body of `<a <a <a ...` held the process for seconds). Here every step either moves past what
 * it scanned or learns that a character no longer occurs, so the work is linear.
 */
export function rewriteAnchors(html: string, replace: (head: string, value: string, tail: string) => string | undefined): string {
  let out = '';
  let copied = 0;
  let from = 0;
  /** Per quote character: the position from which it no longer occurs, once an indexOf missed it. */
  const absentFrom: Record<string, number> = { '"': Number.POSITIVE_INFINITY, "'": Number.POSITIVE_INFINITY };
  for (;;) {
    ANCHOR_START.lastIndex = from;
    const start = ANCHOR_START.exec(html);
    if (!start) break;
    const close = html.indexOf('>', start.index);
    if (close < 0) break;
    const href = HREF_ATTRIBUTE.exec(html.slice(start.index, close));
    from = close + 1;
    if (!href) continue;
    const quote = href[1];
    const valueStart = start.index + href.index + href[0].length;
    const valueEnd = valueStart >= absentFrom[quote] ? -1 : html.indexOf(quote, valueStart);
    if (valueEnd < 0) {
      absentFrom[quote] = Math.min(absentFrom[quote], valueStart);
      continue;
    }
    const tagEnd = html.indexOf('>', valueEnd + 1);
    if (tagEnd < 0) break;
    from = tagEnd + 1;
    const head = html.slice(start.index, valueStart - 1);
    const tail = html.slice(valueEnd + 1, tagEnd + 1);
    const replaced = replace(head, html.slice(valueStart, valueEnd), tail);
    if (replaced === undefined) continue;
    out += `${html.slice(copied, start.index)}${head}"${escapeHtml(replaced)}"${tail}`;
    copied = tagEnd + 1;
  }
  return copied === 0 ? html : out + html.slice(copied);
}

/**
 * Applies open and click tracking to the HTML: every http(s) link becomes its tracked URL
 * (except those marked `data-no-track`), and the pixel goes last in the body. Regular
 * expressions rather than a DOM: templates are rendered HTML whose anchors are plain start
 * tags, and the rest of the document must pass through byte for byte.
 */
export function applyTracking(html: string, tracking: EmailTracking | undefined): string {
  if (!tracking) return html;
  let out = html;
  const link = tracking.link;
  if (link) {
    out = rewriteAnchors(out, (head, raw, tail) => {
      const url = decodeEntities(raw.trim());
      if (!/^https?:\/\//i.test(url) || NO_TRACK.test(head) || NO_TRACK.test(tail)) return undefined;
      const tagAttr = LINK_TAGS.exec(head) ?? LINK_TAGS.exec(tail);
      return link(url, parseLinkTags(tagAttr ? (tagAttr[1] ?? tagAttr[2]) : undefined));
    });
  }
  if (tracking.pixelUrl) {
    const pixel = `<img src="${escapeHtml(tracking.pixelUrl)}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0;margin:0;padding:0" />`;
    const close = out.search(/<\/body\s*>/i);
    out = close >= 0 ? out.slice(0, close) + pixel + out.slice(close) : out + pixel;
  }
  return out;
}

/** `id@domain` without angle brackets; ids without a domain part get the sender's domain. */
export function normalizeMessageId(messageId: string, fromAddress: string): string {
  const bare = messageId.trim().replace(/^<|>$/g, '');
  if (bare.includes('@')) return bare;
  const domain = fromAddress.split('@')[1] || 'clarion.local';
  return `${bare}@${domain}`;
}

/**
 * RFC 5322 §2.1.1: no header line over 998 characters. nodemailer folds a header only at
 * whitespace, a word that does not fit going alone on a continuation line after one space, so a
 * plain subject with a run of 998 or more non-blank characters (the send schema allows 998, a
 * rendered template subject any length) made a longer line. Such a subject goes as RFC 2047
 * encoded-words instead: they may be cut anywhere, fold into short lines, and read back as the
 * same text (nodemailer leaves valid encoded-words as they are; a non-ASCII subject it encodes
 * itself). Every other subject is passed as written.
 */
const LONGEST_FOLDABLE_WORD = 997;

export function foldableSubject(subject: string): string {
  if (subject.length <= LONGEST_FOLDABLE_WORD) return subject;
  let run = 0;
  for (let i = 0; i < subject.length; i++) {
    // Space and tab are where the folding breaks (CR and LF become spaces, other controls get encoded).
    const c = subject.charCodeAt(i);
    if (c === 0x20 || c === 0x09) run = 0;
    else if (++run > LONGEST_FOLDABLE_WORD) return encodeWord(subject, 'Q', 52);
  }
  return subject;
}

export interface ComposedEmail {
  options: Mail.Options;
  messageId: string;
  text: string;
  html: string;
  attachments: ResolvedAttachment[];
}

const oneAddress = (address: string): Mail.Address => ({ name: '', address });

/**
 * Everything a transport needs to build the MIME message; URL attachments are downloaded here.
 * `plainText`: the provider's cache of text alternatives (uncached without one).
 */
export async function composeEmail(message: EmailMessage, fetchOptions: AttachmentFetchOptions = {}, plainText?: PlainTextCache): Promise<ComposedEmail> {
  const attachments = await resolveAttachments(message.attachments, fetchOptions);
  const html = applyTracking(withPreheader(message.html, message.previewText), message.tracking);
  // From the HTML as written: the text part keeps the original links (and the cache its hits).
  const text = plainText ? plainText.convert(message.html) : htmlToPlainText(message.html);
  const messageId = normalizeMessageId(message.messageId, message.from.address);
  const options: Mail.Options = {
    from: message.from.name ? { name: message.from.name, address: message.from.address } : message.from.address,
    to: message.to.name ? { name: message.to.name, address: message.to.address } : message.to.address,
    // As address objects: nodemailer would read a string entry "a@x, b@y" as a list of recipients.
    ...(message.replyTo?.length ? { replyTo: message.replyTo.map(oneAddress) } : {}),
    ...(message.cc?.length ? { cc: message.cc.map(oneAddress) } : {}),
    ...(message.bcc?.length ? { bcc: message.bcc.map(oneAddress) } : {}),
    subject: foldableSubject(message.subject),
    html,
    text,
    messageId: `<${messageId}>`,
    ...(message.headers ? { headers: message.headers } : {}),
    // nodemailer takes a custom envelope whole: its recipients are the message's To, Cc and Bcc.
    ...(message.returnPath ? { envelope: { from: message.returnPath, to: [message.to.address, ...(message.cc ?? []), ...(message.bcc ?? [])] } } : {}),
    attachments: attachments.map((a) => ({
      filename: a.filename,
      content: a.content,
      ...(a.contentType ? { contentType: a.contentType } : {}),
    })),
    // Never let a header value or address smuggle a new header or a file/URL read into nodemailer.
    disableFileAccess: true,
    disableUrlAccess: true,
  };
  return { options, messageId, text, html, attachments };
}

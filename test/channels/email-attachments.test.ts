import { describe, expect, it } from 'vitest';
import { INLINE_ATTACHMENT_MAX_BYTES, base64DecodedLength, validateInlineAttachments } from '../../src/channels/email/attachments.js';
import { normalizeMessageId, withPreheader } from '../../src/channels/email/compose.js';
import { htmlToPlainText } from '../../src/channels/email/plain-text.js';
import { AppError } from '../../src/errors.js';

function rejection(input: unknown): AppError {
  try {
    validateInlineAttachments(input);
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return err as AppError;
  }
  throw new Error('expected a rejection');
}

describe('validateInlineAttachments', () => {
  it('accepts URL and base64 entries in the pingram SDK shape, normalised', () => {
    const content = Buffer.from('hello world').toString('base64');
    expect(
      validateInlineAttachments([
        { filename: 'a.pdf', url: 'https://files.example.com/a.pdf' },
        { filename: 'b.txt', content, contentType: 'text/plain' },
        // the SDK's generated type requires both fields, so one may come empty
        { filename: 'c.txt', url: '', content: `${content.slice(0, 8)}\n${content.slice(8)}` },
        { filename: 'd.png', content: `data:image/png;base64,${content}` },
      ]),
    ).toEqual([
      { filename: 'a.pdf', url: 'https://files.example.com/a.pdf' },
      { filename: 'b.txt', content, contentType: 'text/plain' },
      { filename: 'c.txt', content },
      { filename: 'd.png', content, contentType: 'image/png' },
    ]);
    expect(validateInlineAttachments(undefined)).toEqual([]);
  });

  it('answers 413 ATTACHMENT_TOO_LARGE just over the inline limit, accepts exactly the limit', () => {
    const atLimit = Buffer.alloc(INLINE_ATTACHMENT_MAX_BYTES).toString('base64');
    expect(validateInlineAttachments([{ filename: 'ok.bin', content: atLimit }])).toHaveLength(1);
    const over = Buffer.alloc(INLINE_ATTACHMENT_MAX_BYTES + 1).toString('base64');
    const err = rejection([{ filename: 'big.bin', content: over }]);
    expect(err.code).toBe('ATTACHMENT_TOO_LARGE');
    expect(err.status).toBe(413);
    expect(err.message).toContain('big.bin');
  });

  it.each([
    ['not an array', { filename: 'x' }],
    ['entry not an object', ['x']],
    ['missing filename', [{ url: 'https://x.example/a' }]],
    ['filename with a newline', [{ filename: 'a\r\nBcc: x@y', content: 'aGk=' }]],
    ['neither url nor content', [{ filename: 'a' }]],
    ['both url and content', [{ filename: 'a', url: 'https://x.example/a', content: 'aGk=' }]],
    ['not base64', [{ filename: 'a', content: 'not*base64!' }]],
    ['ftp url', [{ filename: 'a', url: 'ftp://x.example/a' }]],
    ['bad url', [{ filename: 'a', url: 'nope' }]],
    ['bad content type', [{ filename: 'a', content: 'aGk=', contentType: 'text/plain\r\nX-Evil: 1' }]],
    ['number content', [{ filename: 'a', content: 12 }]],
    ['too many', Array.from({ length: 21 }, (_, i) => ({ filename: `f${i}`, content: 'aGk=' }))],
  ])('400 VALIDATION_FAILED for %s', (_name, input) => {
    const err = rejection(input);
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.status).toBe(400);
  });

  it('computes decoded base64 sizes', () => {
    for (const n of [0, 1, 2, 3, 4, 1000]) expect(base64DecodedLength(Buffer.alloc(n).toString('base64'))).toBe(n);
  });
});

describe('message composition helpers', () => {
  it('puts the preheader first even without a <body>', () => {
    const html = withPreheader('<p>Hi</p>', 'Short & sweet <3');
    expect(html.startsWith('<div class="preheader"')).toBe(true);
    expect(html).toContain('Short &amp; sweet &lt;3');
    expect(html.endsWith('<p>Hi</p>')).toBe(true);
    expect(withPreheader('<p>Hi</p>', undefined)).toBe('<p>Hi</p>');
  });

  it('keeps Message-IDs stable and complete', () => {
    expect(normalizeMessageId('<abc@x.test>', 'a@b.test')).toBe('abc@x.test');
    expect(normalizeMessageId('abc', 'a@b.test')).toBe('abc@b.test');
  });

  it('reads HTML as text', () => {
    expect(htmlToPlainText('<h1>Title</h1><p>One <a href="https://x.test">link</a></p><ul><li>a</li><li>b</li></ul>')).toBe(
      'Title\n\nOne link [https://x.test]\n\n * a\n * b',
    );
  });
});

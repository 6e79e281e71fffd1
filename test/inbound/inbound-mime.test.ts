// What Clarion reads of an inbound message itself (inbound-mime.ts): the msg-ids of In-Reply-To and
// References in their RFC 5322 forms, and the count of MIME parts and header bytes mailparser
// could not read past.
import { describe, expect, it } from 'vitest';
import { messageIds, overMimeLimits } from '../../src/modules/addresses/inbound-mime.js';

describe('messageIds', () => {
  it.each([
    ['<a@x>', ['<a@x>']],
    [' <a@x> <b@y>', ['<a@x>', '<b@y>']],
    ['<a@x> (message from Clarion)', ['<a@x>']],
    ['(nested (comment <no@x>) \\) still) <a@x>', ['<a@x>']],
    ['\r\n <a@x>\r\n\t<b@y>', ['<a@x>', '<b@y>']],
    // Obsolete syntax (RFC 5322 4.5.4): phrases between ids, folding inside one.
    ['"Ada <no@x>" <a@x> Your message of Monday', ['<a@x>']],
    ['<a@\r\n x>', ['<a@x>']],
    // An unclosed bracket is no id; the id after it is.
    ['<broken <a@x>', ['<a@x>']],
    ['a@x', ['<a@x>']],
    ['<>', []],
    ['Your message of Monday', []],
  ])('%j', (value, ids) => {
    expect(messageIds(value)).toEqual(ids);
  });
});

describe('overMimeLimits', () => {
  const limits = { maxParts: 3, maxHeaderBytes: 100 };
  const multipart = (contentType: string, parts: string[]) =>
    Buffer.from(`From: a@x\r\nContent-Type: ${contentType}\r\n\r\n${parts.map((p) => `--b\r\n${p}\r\n`).join('')}--b--\r\n`);

  it('counts the parts of declared boundaries, an RFC 2231 continuation too, and embedded messages', () => {
    const three = ['\r\none', '\r\ntwo', '\r\nthree'];
    expect(overMimeLimits(multipart('multipart/mixed; boundary=b', three), limits)).toBeUndefined();
    expect(overMimeLimits(multipart('multipart/mixed; boundary=b', [...three, '\r\nfour']), limits)).toBe('more than 3 MIME parts');
    expect(overMimeLimits(multipart('multipart/mixed;\r\n boundary*0="b"', [...three, '\r\nfour']), limits)).toBe('more than 3 MIME parts');
    expect(overMimeLimits(multipart('multipart/mixed; boundary=b', ['Content-Type: message/rfc822\r\n\r\nFrom: c@x\r\n\r\nhi', ...three.slice(1)]), limits)).toBe('more than 3 MIME parts');
    // `--b` in a message that declares no such boundary is text.
    expect(overMimeLimits(multipart('text/plain', [...three, '\r\nfour']), limits)).toBeUndefined();
  });

  it("measures the message's header section and each part's", () => {
    expect(overMimeLimits(Buffer.from(`From: a@x\r\nX-Pad: ${'a'.repeat(70)}\r\n\r\n${'body '.repeat(100)}\r\n`), limits)).toBeUndefined();
    expect(overMimeLimits(Buffer.from(`From: a@x\r\nX-Pad: ${'a'.repeat(90)}\r\n\r\nbody\r\n`), limits)).toBe('a header section over 100 bytes');
    expect(overMimeLimits(Buffer.from(`From: a@x\r\nX-Pad: ${'a'.repeat(200)}`), limits)).toBe('a header section over 100 bytes');
    expect(overMimeLimits(multipart('multipart/mixed; boundary=b', [`X-Pad: ${'a'.repeat(100)}\r\n\r\none`]), limits)).toBe('a header section over 100 bytes');
  });
});

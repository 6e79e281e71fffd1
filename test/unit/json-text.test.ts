// jsonString: the quoted-string shortcut of the request line and the intake journal must write
// exactly what JSON.stringify writes, for every string, or the lines and chunks would differ.
import { describe, expect, it } from 'vitest';
import { jsonString } from '../../src/json-text.js';

describe('jsonString', () => {
  it('writes JSON.stringify(text) for every BMP code unit alone and inside text', () => {
    for (let code = 0; code <= 0xffff; code++) {
      const c = String.fromCharCode(code);
      expect(jsonString(c)).toBe(JSON.stringify(c));
      expect(jsonString(`id-${c}-x`)).toBe(JSON.stringify(`id-${c}-x`));
    }
  });

  it('writes surrogate pairs as they are and lone surrogates escaped, as JSON.stringify does', () => {
    for (const text of ['\ud83d\ude00', 'a\ud83d\ude00b', '\ud800', 'x\udc00', '\udc00\ud800', '\ud83d\ude00\ud800', '']) {
      expect(jsonString(text)).toBe(JSON.stringify(text));
    }
  });

  it('quotes plain ids, times and addresses without escaping', () => {
    for (const text of ['0190d6f0-0000-7000-8000-000000000001', '2026-11-23T08:00:00.000Z', '127.0.0.1', '::1', 'a@example.com', '/send?envId=x&y=1', 'curl/8.5 (x86_64) é \u2028']) {
      expect(jsonString(text)).toBe(JSON.stringify(text));
      expect(JSON.parse(jsonString(text))).toBe(text);
    }
  });
});

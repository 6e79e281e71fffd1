import secureJson from 'secure-json-parse';
import { AppError } from '../errors.js';

/** Deepest nesting of arrays and objects a JSON body may have (README: Limits). */
export const MAX_JSON_DEPTH = 64;

const BLANK = /^\s*$/;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
// PostgreSQL text cannot hold U+0000, and a lone UTF-16 surrogate is not Unicode: both are
// refused for every route rather than failing (or being silently altered) in storage.
const NUL_ESCAPE = '\\u0000';
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * The JSON body parser of every route: empty reads as no body; nesting deeper than
 * MAX_JSON_DEPTH, `__proto__` / `constructor.prototype` keys, NUL characters and lone
 * surrogates are refused with 400 before anything else sees the body.
 */
export function parseJsonBody(text: string): unknown {
  if (BLANK.test(text)) return undefined;
  // JSON.parse and every recursive walk after it (secure-json-parse, ajv, our services) would
  // overflow the stack on deep input, so the depth is measured on the text, without recursion.
  const depth = fewOpeners(text) ? 0 : maxDepth(text);
  if (depth > MAX_JSON_DEPTH) {
    throw new AppError('VALIDATION_FAILED', `The JSON body is nested ${depth > 10_000 ? 'over 10000' : depth} levels deep; at most ${MAX_JSON_DEPTH} are accepted.`, 'Flatten the body.');
  }
  let value: unknown;
  try {
    value = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    if (err instanceof SyntaxError && /prototype/i.test(err.message)) {
      throw new AppError('INVALID_JSON', 'The JSON body has a "__proto__" or "constructor.prototype" key, which this API refuses.', 'Rename the key.');
    }
    throw new SyntaxError('invalid JSON body', { cause: err });
  }
  // Raw control characters are invalid JSON, so a NUL or a surrogate can only come from an escape:
  // the common body has neither and pays for one indexOf and one regex test.
  const nul = text.includes(NUL_ESCAPE);
  if (nul || ((text.includes('\\ud') || text.includes('\\uD')) && SURROGATE_ESCAPE.test(text))) {
    const where = findBadString(value, nul);
    if (where) throw new AppError('VALIDATION_FAILED', `The JSON body has ${where.what} at ${where.path}.`, where.fix);
  }
  return value;
}

/**
 * True when the text has at most MAX_JSON_DEPTH `{` and `[` in all (strings included), so it cannot
 * nest deeper: native indexOf jumps between them, far cheaper than a scan of every character.
 */
function fewOpeners(text: string): boolean {
  let count = 0;
  for (const opener of ['{', '[']) {
    for (let at = text.indexOf(opener); at >= 0; at = text.indexOf(opener, at + 1)) {
      if (++count > MAX_JSON_DEPTH) return false;
    }
  }
  return true;
}

/** The deepest nesting of `{`/`[` outside strings, by one linear scan of the text. */
export function maxDepth(text: string): number {
  let depth = 0;
  let max = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // Skip the string; a backslash escapes the next character.
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) max = depth;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return max;
}

interface BadString {
  what: string;
  path: string;
  fix: string;
}

/** Where the first NUL or lone surrogate is (key or value), as a JSON path; the depth is bounded by now. */
function findBadString(root: unknown, nul: boolean): BadString | undefined {
  const check = (s: string, path: string): BadString | undefined => {
    if (nul && s.includes('\u0000')) return { what: 'a NUL character (\\u0000)', path, fix: 'Remove the NUL characters; text fields cannot hold them.' };
    if (LONE_SURROGATE.test(s)) return { what: 'a lone UTF-16 surrogate (not valid Unicode)', path, fix: 'Send valid Unicode text.' };
    return undefined;
  };
  const stack: [unknown, string][] = [[root, '$']];
  while (stack.length) {
    const [value, path] = stack.pop() as [unknown, string];
    if (typeof value === 'string') {
      const bad = check(value, path);
      if (bad) return bad;
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push([item, `${path}[${i}]`]));
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        // eslint-disable-next-line no-control-regex -- NUL is exactly what this masks in the path it reports
        const child = `${path}.${key.replace(/[\u0000\ud800-\udfff]/g, '?')}`;
        const bad = check(key, `${child} (a key)`);
        if (bad) return bad;
        stack.push([item, child]);
      }
    }
  }
  return undefined;
}

/** The NUL character in a URL: raw, or percent-encoded (the only encoding of U+0000 that decodes). */
export function nulInUrl(url: string): 'path' | 'query string' | undefined {
  const escaped = url.indexOf('%00');
  const at = escaped >= 0 ? escaped : url.indexOf('\u0000');
  if (at < 0) return undefined;
  const query = url.indexOf('?');
  return query >= 0 && query < at ? 'query string' : 'path';
}

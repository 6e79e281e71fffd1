/**
 * What JSON.stringify escapes in a string: the quote, the backslash, control characters, and
 * surrogates (lone ones; a pair passes unchanged, but one test per code unit cannot tell, so
 * any surrogate takes JSON.stringify).
 */
// eslint-disable-next-line no-control-regex -- control characters are exactly what JSON escapes
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * JSON.stringify(text) for one string, the same text, without the call into the runtime when
 * nothing in it needs escaping (ids, times, methods, addresses: most of what the hot paths
 * write). A regular-expression test is about half of what a JSON.stringify call of a short
 * string costs, and the request line and a journaled send each quote about ten strings
 * (measured, issue 11).
 */
export function jsonString(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

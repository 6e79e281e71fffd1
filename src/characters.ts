/**
 * A string's length in characters (Unicode code points), as the spec's limits count them and as
 * JSON Schema's maxLength does in the routes' schemas; `.length` counts UTF-16 code units, so an
 * emoji counts 2 there. A lone surrogate counts as one character.
 */
export function characterCount(text: string): number {
  let count = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        count--;
        i++;
      }
    }
  }
  return count;
}

/**
 * Text as both engines can store it: U+0000 becomes U+FFFD. PostgreSQL's text and jsonb refuse
 * the NUL character (22021, or "unsupported Unicode escape sequence" for `\u0000` in jsonb), so
 * text from outside (a reply's headers, an endpoint's answer) holding one failed every write of
 * it there, and a retry could never succeed; SQLite keeps the same replacement so both answer
 * alike.
 */
export function storableText(text: string): string {
  return text.includes('\0') ? text.replaceAll('\0', '\uFFFD') : text;
}

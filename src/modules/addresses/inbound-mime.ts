// What Clarion reads of an inbound message itself, beside mailparser: whether mailparser can read
// it whole (its limits), and the msg-ids of In-Reply-To and References, which mailparser mangles.

/**
 * What an inbound message may hold for mailparser to read it whole. Past its own limits the
 * parser fails without saying so: mailsplit stops at 1,000 MIME nodes and at a header section over
 * 1 MiB, and mailparser drops that error, so the rest of the message is lost (no header section at
 * all, a text cut short) or, when the stop falls inside an attachment, the parse never settles and
 * the SMTP session that waits for it is held forever. A message is checked against these limits
 * before it is parsed; they are half the parser's, so the ways a count made here can differ from
 * mailsplit's (a few bytes of line ends, a node it does or does not open) never reach its limits.
 */
export interface MimeLimits {
  /** Body parts of multipart entities, nested ones included, and embedded messages (message/rfc822). */
  maxParts: number;
  /** Bytes of one header section: the message's, or one of its parts'. */
  maxHeaderBytes: number;
}

/** Real mail has a few dozen parts at most, and a header section of a few to some tens of KB. */
export const MIME_LIMITS: MimeLimits = { maxParts: 500, maxHeaderBytes: 512 * 1024 };

// A boundary parameter, quoted or not, or one piece of an RFC 2231 continuation (boundary*0=...).
const BOUNDARY_PARAM = /\bboundary(?:\*(\d+))?\*?[ \t]*=[ \t]*(?:"((?:[^"\\\r\n]|\\.)*)"|([^\s;"]+))/gi;
const EMBEDDED_MESSAGE = /^content-type:[ \t]*message\/rfc822\b/i;

/**
 * Why `raw` is over `limits` (for the refusal), or undefined. It reads lines as mailsplit does:
 * a line `--boundary` opens a part (RFC 2046 5.1.1) whose header section runs to the first empty
 * line, and `--boundary--` closes the multipart. The boundaries are the ones declared anywhere
 * in the message, which can only count more parts than the parser finds; a boundary or an
 * embedded message declared in a form not read here (a folded or encoded parameter) is left to the
 * parse deadline.
 */
export function overMimeLimits(raw: Buffer, limits: MimeLimits): string | undefined {
  // latin1: one character per byte, so lengths are bytes and boundaries compare byte for byte.
  const text = raw.toString('latin1');
  const boundaries = declaredBoundaries(text);
  let parts = 0;
  // Where the header section being read began; undefined in a body.
  let headerStart: number | undefined = 0;
  for (let start = 0; start < text.length; ) {
    const newline = text.indexOf('\n', start);
    const end = newline < 0 ? text.length : newline + 1;
    const line = text.slice(start, newline < 0 ? end : text[newline - 1] === '\r' ? newline - 1 : newline);
    start = end;
    // As in mailsplit, a delimiter counts wherever it is, in a header section too.
    if (line.startsWith('--') && boundaries.has(line.slice(2))) {
      if (++parts > limits.maxParts) return `more than ${limits.maxParts} MIME parts`;
      headerStart = end;
    } else if (line.startsWith('--') && line.endsWith('--') && boundaries.has(line.slice(2, -2))) {
      headerStart = undefined;
    } else if (headerStart !== undefined) {
      if (line === '') headerStart = undefined;
      else if (end - headerStart > limits.maxHeaderBytes) return `a header section over ${limits.maxHeaderBytes} bytes`;
      else if (EMBEDDED_MESSAGE.test(line) && ++parts > limits.maxParts) return `more than ${limits.maxParts} MIME parts`;
    }
  }
  return undefined;
}

function declaredBoundaries(text: string): Set<string> {
  const found = new Set<string>();
  let continued = '';
  for (const [, piece, quoted, token] of text.matchAll(BOUNDARY_PARAM)) {
    const value = quoted === undefined ? token : quoted.replace(/\\(.)/g, '$1');
    if (piece === undefined) found.add(value);
    else {
      continued = piece === '0' ? value : continued + value;
      found.add(continued);
    }
  }
  return found;
}

/**
 * The msg-ids of an In-Reply-To or References value, `<left@right>` in order: one or more, with
 * comments and folding between them (RFC 5322 3.6.4), and phrases too in the obsolete syntax (4.5.4).
 */
export function messageIds(value: string): string[] {
  const ids: string[] = [];
  const words: string[] = [];
  const word = /[^\s("<]+/y;
  for (let i = 0; i < value.length; ) {
    const c = value[i];
    if (c === '(') i = afterComment(value, i);
    // A quoted string is a phrase's (obsolete syntax), or an id's in a form Clarion never sends.
    else if (c === '"') i = afterQuotedString(value, i);
    else if (c === '<') {
      const end = value.indexOf('>', i);
      if (end < 0) break;
      // From the last `<` before the `>`: an id holds none, so an unclosed one before it was not an id.
      // Folding inside an id is obsolete syntax (4.5.4) and no part of it.
      const id = value.slice(value.lastIndexOf('<', end) + 1, end).replace(/\s+/g, '');
      if (id) ids.push(`<${id}>`);
      i = end + 1;
    } else if (/\s/.test(c)) i++;
    else {
      word.lastIndex = i;
      const w = word.exec(value)![0];
      words.push(w);
      i += w.length;
    }
  }
  // No id in angle brackets: an id alone without them, as some mailers send it (mailparser reads it so too).
  return ids.length ? ids : words.filter((w) => w.includes('@')).map((w) => `<${w}>`);
}

/** The index after the comment that opens at `start` (comments nest, RFC 5322 3.2.2). */
function afterComment(value: string, start: number): number {
  let depth = 0;
  for (let i = start; i < value.length; i++) {
    if (value[i] === '\\') i++;
    else if (value[i] === '(') depth++;
    else if (value[i] === ')' && --depth === 0) return i + 1;
  }
  return value.length;
}

function afterQuotedString(value: string, start: number): number {
  for (let i = start + 1; i < value.length; i++) {
    if (value[i] === '\\') i++;
    else if (value[i] === '"') return i + 1;
  }
  return value.length;
}

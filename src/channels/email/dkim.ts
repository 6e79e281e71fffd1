import { type KeyObject, createHash, createPrivateKey, sign } from 'node:crypto';
import { promisify } from 'node:util';
import { foldLines } from 'nodemailer/lib/mime-funcs/index.js';
import { normalizeDomain } from 'nodemailer/lib/shared/index.js';
import type { EmailDkimKey } from '../types.js';

/**
 * The header fields the signature covers, when present: who it is from and to, what it is, and
 * the one-click unsubscribe pair (RFC 8058 4: a receiver honours List-Unsubscribe-Post only when
 * the signature covers both), plus the MIME structure fields so a receiver's check of the body
 * hash reads the body the way it was signed.
 */
export const DKIM_SIGNED_HEADERS = [
  'From',
  'To',
  'Cc',
  'Reply-To',
  'Subject',
  'Date',
  'Message-ID',
  'MIME-Version',
  'Content-Type',
  'List-Unsubscribe',
  'List-Unsubscribe-Post',
].join(':');

const SIGNED_FIELDS = DKIM_SIGNED_HEADERS.toLowerCase().split(':');
const WANTED = new Set(SIGNED_FIELDS);
/** Parsed keys kept per signer: a process signs for a handful of domains, and a rotated key ages out. */
const MAX_PARSED_KEYS = 64;
const CRLF = Buffer.from('\r\n');
/** crypto.sign with a callback, which runs on libuv's thread pool. */
const signOnPool = promisify(sign);

/**
 * Signs built MIME messages as nodemailer's DKIM signer does (rsa-sha256, relaxed/relaxed, the
 * same tags, folding and bytes: test/channels/email-dkim.test.ts compares the two), in one pass
 * over the message instead of its chain of streams: the DKIM-Signature header is put first, the
 * message follows byte for byte. Keeps each PEM key it is given parsed (a KeyObject): parsing a
 * 2048-bit key costs more than the RSA signature itself (about 650 µs against 250 µs a mail on
 * the benchmark host), and a broadcast signs every mail with the same key.
 */
export class DkimSigner {
  private readonly parsed = new Map<string, KeyObject>();

  /**
   * The signed message. The RSA signature is computed on libuv's thread pool (crypto.sign with a
   * callback), not on the calling thread: it is most of a signed mail's CPU (about 1.2 ms of 2.9
   * on the MIME thread, measured on a slow host), and on the thread that builds every mail it
   * capped a broadcast's rate; on the pool the next mail is built while this one is signed.
   */
  async sign(raw: Buffer, key: EmailDkimKey): Promise<Buffer> {
    const privateKey = this.privateKey(key);
    const split = headerEnd(raw);
    const fields = relaxedHeaderFields(raw.toString('latin1', 0, split));
    const header = dkimHeader(key, fields.names, relaxedBodyHash(raw.subarray(split)));
    let signature: string;
    try {
      signature = (await signOnPool('sha256', Buffer.from(`${fields.canonical}dkim-signature:${relaxedValue(header)}`, 'latin1'), privateKey)).toString('base64');
    } catch {
      throw signingFailed(key);
    }
    // As nodemailer folds b=: 73 characters on the first line, 75 on the next ones.
    const folded = header + signature.replace(/(^.{73}|.{75}(?!\r?\n|\r))/g, '$&\r\n ').trim();
    return Buffer.concat([Buffer.from(folded), CRLF, raw]);
  }

  private privateKey(key: EmailDkimKey): KeyObject {
    const known = this.parsed.get(key.privateKey);
    if (known) return known;
    let parsed: KeyObject;
    try {
      parsed = createPrivateKey(key.privateKey);
    } catch {
      throw signingFailed(key);
    }
    // The signature says rsa-sha256: another kind of key would sign something receivers reject.
    if (parsed.asymmetricKeyType !== 'rsa') throw signingFailed(key);
    if (this.parsed.size >= MAX_PARSED_KEYS) this.parsed.delete(this.parsed.keys().next().value as string);
    this.parsed.set(key.privateKey, parsed);
    return parsed;
  }
}

const signingFailed = (key: EmailDkimKey) => Object.assign(new Error(`DKIM signing failed for ${key.domainName}`), { code: 'EDKIM' });

/** Where the body starts: past the first empty line (LF LF or LF CR LF); no body without one. */
function headerEnd(raw: Buffer): number {
  for (let lf = raw.indexOf(0x0a); lf !== -1; lf = raw.indexOf(0x0a, lf + 1)) {
    if (raw[lf + 1] === 0x0a) return lf + 2;
    if (raw[lf + 1] === 0x0d && raw[lf + 2] === 0x0a) return lf + 3;
  }
  return raw.length;
}

/** A field value in relaxed canonicalization (RFC 6376 3.4.2): unfolded, SP and HTAB runs one SP, none at either end. */
function relaxedValue(line: string): string {
  return line
    .slice(line.indexOf(':') + 1)
    .replace(/\r?\n/g, '')
    .replace(/[ \t]+/g, ' ')
    .replace(/^ | $/g, '');
}

/** Only SP and HTAB: another space (a no-break space) in a field name is part of it. */
function trimSpaceTab(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s.charCodeAt(start) === 0x20 || s.charCodeAt(start) === 0x09)) start++;
  while (end > start && (s.charCodeAt(end - 1) === 0x20 || s.charCodeAt(end - 1) === 0x09)) end--;
  return s.slice(start, end);
}

/**
 * The signed fields present in the header, canonicalized, in SIGNED_FIELDS order: of a field
 * that occurs more than once, the last one (RFC 6376 5.4.2), as one byte per character.
 */
function relaxedHeaderFields(header: string): { canonical: string; names: string } {
  const lines: string[] = [];
  for (const line of header.split(/\r?\n/)) {
    const first = line.charCodeAt(0);
    if (lines.length > 0 && (first === 0x20 || first === 0x09)) lines[lines.length - 1] += `\n${line}`;
    else lines.push(line);
  }
  const values = new Map<string, string>();
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i];
    const colon = line.indexOf(':');
    const name = colon < 0 ? '' : trimSpaceTab(line.slice(0, colon)).toLowerCase();
    if (WANTED.has(name) && !values.has(name)) values.set(name, relaxedValue(line));
  }
  const names = SIGNED_FIELDS.filter((name) => values.has(name));
  return { canonical: `${names.map((name) => `${name}:${values.get(name)}`).join('\r\n')}\r\n`, names: names.join(':') };
}

/** A tag value with nothing that could end it or open another tag. */
// eslint-disable-next-line no-control-regex -- removing control characters is the point
const tagValue = (value: string) => value.replace(/[\x00-\x1f\x7f;=]/g, '');

/** The DKIM-Signature header up to its empty b= tag, folded at 76 characters. */
function dkimHeader(key: EmailDkimKey, names: string, bodyHash: string): string {
  const tags = [
    'v=1',
    'a=rsa-sha256',
    'c=relaxed/relaxed',
    `d=${normalizeDomain(tagValue(key.domainName), false)}`,
    'q=dns/txt',
    `s=${tagValue(key.keySelector)}`,
    `bh=${bodyHash}`,
    `h=${tagValue(names)}`,
  ].join('; ');
  return `${foldLines(`DKIM-Signature: ${tags}`, 76)};\r\n b=`;
}

/** A line's content with its SP and HTAB runs made one SP and those at its end dropped. */
function collapseSpaces(line: Buffer): Buffer {
  const out = Buffer.allocUnsafe(line.length);
  let length = 0;
  let space = false;
  for (let i = 0; i < line.length; i++) {
    const byte = line[i];
    if (byte === 0x20 || byte === 0x09) {
      space = true;
      continue;
    }
    if (space) out[length++] = 0x20;
    space = false;
    out[length++] = byte;
  }
  return out.subarray(0, length);
}

/**
 * The base64 SHA-256 of the body in relaxed canonicalization (RFC 6376 3.4.4): per line, SP and
 * HTAB runs one SP and none at the end, CRLF line ends, empty lines at the end of the body
 * dropped. A line ends at LF (a CR before it is part of the line end, any other CR is content).
 * Runs of lines already canonical (base64 parts, most of an HTML part) are hashed as they are.
 */
function relaxedBodyHash(body: Buffer): string {
  const hash = createHash('sha256');
  let emptyLines = 0;
  let runStart = -1;
  let runEnd = 0;
  const flushRun = () => {
    if (runStart >= 0) hash.update(body.subarray(runStart, runEnd));
    runStart = -1;
  };
  let nextSpace = body.indexOf(0x20);
  let nextTab = body.indexOf(0x09);
  for (let next = 0; next < body.length; ) {
    const pos = next;
    const lf = body.indexOf(0x0a, pos);
    next = lf < 0 ? body.length : lf + 1;
    const crlf = lf > pos && body[lf - 1] === 0x0d;
    const end = lf < 0 ? body.length : crlf ? lf - 1 : lf;
    if (nextSpace >= 0 && nextSpace < pos) nextSpace = body.indexOf(0x20, pos);
    if (nextTab >= 0 && nextTab < pos) nextTab = body.indexOf(0x09, pos);
    const spaced = (nextSpace >= 0 && nextSpace < end) || (nextTab >= 0 && nextTab < end);
    const content = spaced ? collapseSpaces(body.subarray(pos, end)) : body.subarray(pos, end);
    if (content.length === 0) {
      emptyLines++;
      continue;
    }
    if (emptyLines > 0) {
      flushRun();
      for (; emptyLines > 0; emptyLines--) hash.update(CRLF);
    }
    if (!spaced && crlf) {
      // Canonical as it is, its CRLF included: joins the run.
      if (runStart < 0) runStart = pos;
      runEnd = next;
      continue;
    }
    flushRun();
    hash.update(content);
    hash.update(CRLF);
  }
  flushRun();
  return hash.digest('base64');
}

import { type KeyObject, createPrivateKey } from 'node:crypto';
import DKIM from 'nodemailer/lib/dkim/index.js';
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

/** Parsed keys kept per signer: a process signs for a handful of domains, and a rotated key ages out. */
const MAX_PARSED_KEYS = 64;

/**
 * Signs built MIME messages (rsa-sha256, relaxed/relaxed): the DKIM-Signature header is put first,
 * the message follows byte for byte. Keeps each PEM key it is given parsed (a KeyObject): parsing
 * a 2048-bit PEM key costs more than the RSA signature itself (about 650 µs against 250 µs a mail
 * on the benchmark host), and a broadcast signs every mail with the same key.
 */
export class DkimSigner {
  private readonly parsed = new Map<string, KeyObject>();

  async sign(raw: Buffer, key: EmailDkimKey): Promise<Buffer> {
    const privateKey = this.privateKey(key);
    // nodemailer's signer hands the key to crypto's sign(), which takes a KeyObject as it takes a PEM string.
    const signer = new DKIM({ domainName: key.domainName, keySelector: key.keySelector, privateKey: privateKey as unknown as string, headerFieldNames: DKIM_SIGNED_HEADERS });
    const chunks: Buffer[] = [];
    const stream = signer.sign(raw);
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    const signed = Buffer.concat(chunks);
    // nodemailer's signer leaves a message unsigned when the key cannot sign: refuse instead of sending it unsigned.
    if (!signed.subarray(0, 16).toString('latin1').startsWith('DKIM-Signature:')) throw signingFailed(key);
    return signed;
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
    if (this.parsed.size >= MAX_PARSED_KEYS) this.parsed.delete(this.parsed.keys().next().value as string);
    this.parsed.set(key.privateKey, parsed);
    return parsed;
  }
}

const signingFailed = (key: EmailDkimKey) => Object.assign(new Error(`DKIM signing failed for ${key.domainName}`), { code: 'EDKIM' });

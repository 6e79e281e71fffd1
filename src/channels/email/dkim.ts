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

/**
 * Signs a built MIME message with nodemailer's DKIM signer (rsa-sha256, relaxed/relaxed): the
 * DKIM-Signature header is put first, the message follows byte for byte.
 */
export async function dkimSign(raw: Buffer, key: EmailDkimKey): Promise<Buffer> {
  const signer = new DKIM({ domainName: key.domainName, keySelector: key.keySelector, privateKey: key.privateKey, headerFieldNames: DKIM_SIGNED_HEADERS });
  const chunks: Buffer[] = [];
  const stream = signer.sign(raw);
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  const signed = Buffer.concat(chunks);
  // nodemailer's signer leaves a message unsigned when the key cannot sign: refuse instead of sending it unsigned.
  if (!signed.subarray(0, 16).toString('latin1').startsWith('DKIM-Signature:')) throw Object.assign(new Error(`DKIM signing failed for ${key.domainName}`), { code: 'EDKIM' });
  return signed;
}

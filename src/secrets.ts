import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/**
 * Server-side secret material. One root key (CLARION_SECRET_KEY, or a file generated in the
 * data directory) is split with HKDF into independent keys per purpose, so a leak of one use
 * (say a JWT) says nothing about the encryption key of stored client secrets.
 */
export class Secrets {
  private readonly encryptionKey: Buffer;
  readonly jwtKey: Uint8Array;
  /** Signs the tokens of tracking pixels, tracked links and unsubscribe links (modules/engagement). */
  readonly engagementKey: Buffer;

  constructor(rootKey: Buffer) {
    if (rootKey.length < 32) throw new Error('the server secret key must be at least 32 bytes');
    this.encryptionKey = Buffer.from(hkdfSync('sha256', rootKey, 'clarion', 'secret-encryption-v1', 32));
    this.jwtKey = new Uint8Array(hkdfSync('sha256', rootKey, 'clarion', 'jwt-hs256-v1', 32));
    this.engagementKey = Buffer.from(hkdfSync('sha256', rootKey, 'clarion', 'engagement-token-v1', 32));
  }

  /** AES-256-GCM; output `v1.<iv>.<tag>.<ciphertext>` in base64url. */
  encrypt(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.encryptionKey, iv);
    const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return ['v1', iv, cipher.getAuthTag(), ct].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
  }

  decrypt(sealed: string): string {
    const [version, iv, tag, ct] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || ct === undefined) throw new Error('unrecognised sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.encryptionKey, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

export function randomToken(bytes: number): string {
  return randomBytes(bytes).toString('base64url');
}

/** The server's secret key cannot be used: printed as one line by the CLI, exit 1. */
export class SecretKeyProblem extends Error {}

const HEX = /^[0-9a-fA-F]+$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/**
 * A root key as configured: hex (64+ digits) or base64 / base64url of 32+ bytes. Anything
 * else throws, rather than being read leniently: a key file cut by one character used to be
 * read as 47 bytes of base64 and seal nothing the stored secrets were sealed with.
 */
export function parseKey(raw: string): Buffer {
  const trimmed = raw.trim();
  if (trimmed === '') throw new Error('it is empty');
  let key: Buffer;
  // Hex digits only is hex, whatever the length: base64 of 32 random bytes has other letters.
  if (HEX.test(trimmed)) {
    if (trimmed.length % 2 !== 0) throw new Error(`${trimmed.length} hex digits, an odd number`);
    key = Buffer.from(trimmed, 'hex');
  } else if (BASE64.test(trimmed) || BASE64URL.test(trimmed)) key = Buffer.from(trimmed, 'base64');
  else throw new Error('neither hex nor base64');
  if (key.length < 32) throw new Error(`${key.length} bytes, fewer than 32`);
  return key;
}

/** The configured root key, or the one kept in `<dataDir>/secret.key` (created 0600 on first use). */
export function loadRootKey(configured: string | undefined, dataDir: string): Buffer {
  if (configured) return parseKey(configured);
  const file = path.join(dataDir, 'secret.key');
  const read = () => {
    try {
      return parseKey(fs.readFileSync(file, 'utf8'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code) throw err;
      throw new SecretKeyProblem(`${file} is not a usable key (${(err as Error).message}): restore the file this database was created with, or set CLARION_SECRET_KEY to that key`);
    }
  };
  try {
    return read();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  try {
    fs.writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    return key;
  } catch (err) {
    // Another process created it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return read();
    throw err;
  }
}

/**
 * Refuses a root key that does not open what the database holds sealed (a sample: one
 * environment's client secret). A secret.key lost or replaced, the server would start and
 * accept sends that then fail at delivery ("unable to authenticate data") and answer 500 on
 * the routes that read secrets.
 */
export function assertOpensSealed(secrets: Secrets, sealedSample: string | undefined): void {
  if (sealedSample === undefined) return;
  try {
    secrets.decrypt(sealedSample);
  } catch {
    throw new SecretKeyProblem(
      'the server secret key (CLARION_SECRET_KEY, else secret.key in the data directory) does not open the secrets stored in this database: restore the key it was created with',
    );
  }
}

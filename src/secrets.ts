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

/** A root key as configured: hex (64+ digits) or base64. */
export function parseKey(raw: string): Buffer {
  const trimmed = raw.trim();
  if (/^[0-9a-fA-F]{64,}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  return Buffer.from(trimmed, 'base64');
}

/** The configured root key, or the one kept in `<dataDir>/secret.key` (created 0600 on first use). */
export function loadRootKey(configured: string | undefined, dataDir: string): Buffer {
  if (configured) return parseKey(configured);
  const file = path.join(dataDir, 'secret.key');
  try {
    return parseKey(fs.readFileSync(file, 'utf8'));
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
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return parseKey(fs.readFileSync(file, 'utf8'));
    throw err;
  }
}

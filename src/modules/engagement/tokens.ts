import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Tokens of the links Clarion puts in email: the tracking pixel, tracked links and the
 * unsubscribe link. A token is `<payload>.<mac>`, both base64url: the payload a JSON array
 * whose first element is the token's kind, the MAC the first 16 bytes of HMAC-SHA256 over the
 * payload text, keyed by a key derived from the server's secret key (Secrets.engagementKey).
 * Tokens are unforgeable, not secret: a reader of the mail sees the link it leads to anyway.
 * The kind inside the signed payload keeps a token of one kind from being used as another.
 * Nothing is stored per token, so links keep working for as long as the key does; what a token
 * acts on (a delivery, a user's preference) is looked up inside the environment it names.
 *
 * The List-Unsubscribe mailto address needs a shorter token: an RFC 5321 local part has at most
 * 64 octets, and mail systems may change its case. Its token (mailToken) is the delivery's UUID
 * and a 10-byte MAC, both in lower-case base32: 42 characters from [a-z2-7], so
 * `unsubscribe+<token>` is 54. Its MAC is over `mail-unsubscribe:<uuid>`, text that no payload of
 * the other tokens (base64url, which has no ':') can be, so neither kind passes as the other.
 */

export interface OpenToken {
  kind: 'open';
  envId: string;
  deliveryId: string;
}

export interface ClickToken {
  kind: 'click';
  envId: string;
  deliveryId: string;
  url: string;
  /** The link's tags (data-link-tags="name:value;..."), as the log and webhook carry them. */
  tags?: Record<string, string[]>;
}

export interface UnsubscribeToken {
  kind: 'unsubscribe';
  accountId: string;
  envId: string;
  userId: string;
  notificationId: string;
  /** The send the link came in (for the EMAIL_UNSUBSCRIBE event). */
  trackingId: string;
}

export type EngagementToken = OpenToken | ClickToken | UnsubscribeToken;

const MAC_BYTES = 16;
const MAIL_MAC_BYTES = 10;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** 16 bytes and 10 bytes in base32 without padding. */
export const MAIL_TOKEN = /^[a-z2-7]{42}$/;

export class EngagementTokens {
  constructor(private readonly key: Buffer) {}

  sign(token: EngagementToken): string {
    const fields =
      token.kind === 'open'
        ? ['o', token.envId, token.deliveryId]
        : token.kind === 'click'
          ? ['c', token.envId, token.deliveryId, token.url, ...(token.tags ? [token.tags] : [])]
          : ['u', token.accountId, token.envId, token.userId, token.notificationId, token.trackingId];
    const payload = Buffer.from(JSON.stringify(fields)).toString('base64url');
    return `${payload}.${this.mac(payload).toString('base64url')}`;
  }

  /** The token's content when its MAC is right and it is of `kind`; null for anything else. */
  verify<K extends EngagementToken['kind']>(raw: string, kind: K): Extract<EngagementToken, { kind: K }> | null {
    const dot = raw.indexOf('.');
    if (dot <= 0 || raw.length > 8192) return null;
    const payload = raw.slice(0, dot);
    // Compared as text: decoding would accept other spellings of the same bytes (the last
    // character's unused bits), so an altered token would pass.
    const given = Buffer.from(raw.slice(dot + 1));
    const expected = Buffer.from(this.mac(payload).toString('base64url'));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    let fields: unknown;
    try {
      fields = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      return null;
    }
    if (!Array.isArray(fields) || !fields.slice(0, kind === 'click' ? 4 : fields.length).every((f) => typeof f === 'string')) return null;
    const [k, ...rest] = fields as string[];
    let token: EngagementToken | null = null;
    if (k === 'o' && rest.length === 2) token = { kind: 'open', envId: rest[0], deliveryId: rest[1] };
    else if (k === 'c' && (rest.length === 3 || rest.length === 4)) {
      const tags = (fields as unknown[])[4] as Record<string, string[]> | undefined;
      token = { kind: 'click', envId: rest[0], deliveryId: rest[1], url: rest[2], ...(tags ? { tags } : {}) };
    } else if (k === 'u' && rest.length === 5) {
      token = { kind: 'unsubscribe', accountId: rest[0], envId: rest[1], userId: rest[2], notificationId: rest[3], trackingId: rest[4] };
    }
    return token && token.kind === kind ? (token as Extract<EngagementToken, { kind: K }>) : null;
  }

  /** The mailto token of a delivery: null when its id is not a UUID (then the mail has no mailto). */
  mailToken(deliveryId: string): string | null {
    const id = deliveryId.toLowerCase();
    if (!UUID.test(id)) return null;
    return base32(Buffer.from(id.replace(/-/g, ''), 'hex')) + base32(this.mailMac(id));
  }

  /** The delivery id of a mailto token (any case), or null when it is not one this key made. */
  verifyMailToken(raw: string): string | null {
    const token = raw.toLowerCase();
    if (!MAIL_TOKEN.test(token)) return null;
    const bytes = unbase32(token.slice(0, 26));
    // Only the canonical spelling: the last character's two unused bits must be zero.
    if (base32(bytes) !== token.slice(0, 26)) return null;
    const hex = bytes.toString('hex');
    const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    const given = Buffer.from(token.slice(26));
    const expected = Buffer.from(base32(this.mailMac(id)));
    return given.length === expected.length && timingSafeEqual(given, expected) ? id : null;
  }

  private mailMac(uuid: string): Buffer {
    return createHmac('sha256', this.key).update(`mail-unsubscribe:${uuid}`).digest().subarray(0, MAIL_MAC_BYTES);
  }

  private mac(payload: string): Buffer {
    return createHmac('sha256', this.key).update(payload).digest().subarray(0, MAC_BYTES);
  }
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** RFC 4648 base32, lower case, no padding. */
function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** The bytes of lower-case base32 text (characters already checked); leftover bits are dropped. */
function unbase32(text: string): Buffer {
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const char of text) {
    value = ((value << 5) | BASE32.indexOf(char)) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

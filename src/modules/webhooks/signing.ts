import { createHmac, randomBytes } from 'node:crypto';

/**
 * Webhook signatures. Every delivery carries two schemes over the same raw body:
 *
 * - X-Service-Id (the event id), X-Service-Timestamp (unix milliseconds) and
 *   X-Service-Signature: `v1,<hex HMAC-SHA256(secret, id + "." + timestamp + "." + body)>`,
 *   keyed by the whole secret string as shown to the user: what `verify` of `pingram/webhooks`
 *   checks. While a rotated secret overlaps, this one uses the new secret.
 * - Standard Webhooks (the `standardwebhooks` package and every verifier of that spec):
 *   webhook-id, webhook-timestamp (unix seconds), webhook-signature:
 *   `v1,<base64 HMAC-SHA256(key, id + "." + seconds + "." + body)>` keyed by the base64-decoded
 *   part of the secret after `whsec_`; one signature per live secret, space-separated.
 */

export const SECRET_PREFIX = 'whsec_';
/** Random bytes of a secret (the issue asks for at least 24). */
const SECRET_BYTES = 24;

export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/** The keys of one secret, derived once per secret, not per delivery. */
export interface SigningKey {
  /** The whole secret string (X-Service-Signature). */
  whole: Buffer;
  /** The bytes the secret encodes (Standard Webhooks). */
  raw: Buffer;
}

export function signingKey(secret: string): SigningKey {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  return { whole: Buffer.from(secret, 'utf8'), raw: Buffer.from(encoded, 'base64') };
}

/** A type, not an interface, so that it is a Record<string, string> (what the sender takes). */
export type SignedHeaders = {
  'x-service-id': string;
  'x-service-timestamp': string;
  'x-service-signature': string;
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

/**
 * The signature headers of one attempt. `keys[0]` is the current secret; a second key (the
 * previous secret during its overlap) adds a second Standard Webhooks signature.
 */
export function signatureHeaders(keys: readonly SigningKey[], id: string, timestampMs: number, body: string): SignedHeaders {
  const ms = String(timestampMs);
  const seconds = String(Math.floor(timestampMs / 1000));
  const service = createHmac('sha256', keys[0].whole).update(`${id}.${ms}.${body}`).digest('hex');
  const standard = keys.map((key) => `v1,${createHmac('sha256', key.raw).update(`${id}.${seconds}.${body}`).digest('base64')}`).join(' ');
  return {
    'x-service-id': id,
    'x-service-timestamp': ms,
    'x-service-signature': `v1,${service}`,
    'webhook-id': id,
    'webhook-timestamp': seconds,
    'webhook-signature': standard,
  };
}

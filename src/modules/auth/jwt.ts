import { SignJWT, jwtVerify } from 'jose';
import type { Secrets } from '../../secrets.js';

const ISSUER = 'clarion';
const AUDIENCE = 'clarion-api';
/** How far ahead of this server's clock a token's issue time may be (another process's clock). */
const CLOCK_SKEW_SECONDS = 60;

export interface AccountTokenClaims {
  accountId: string;
  /** Who acts: a person's id or e.g. "cli". */
  subject: string;
}

/** HS256 token for people and scripts acting on an account (`clarion token`, later the dashboard); `now` from the caller's clock. */
export async function signAccountToken(secrets: Secrets, claims: AccountTokenClaims, ttlSeconds: number, now: Date): Promise<string> {
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ acc: claims.accountId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(claims.subject)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ttlSeconds)
    .sign(secrets.jwtKey);
}

/** Returns the claims, or null for any invalid, expired or foreign token. */
export async function verifyAccountToken(secrets: Secrets, token: string, now: Date): Promise<AccountTokenClaims | null> {
  try {
    const { payload } = await jwtVerify(token, secrets.jwtKey, {
      issuer: ISSUER,
      audience: AUDIENCE,
      algorithms: ['HS256'],
      currentDate: now,
      // A token without an expiry would be a credential forever.
      requiredClaims: ['exp', 'sub'],
    });
    if (typeof payload.acc !== 'string' || typeof payload.sub !== 'string') return null;
    // Issued in the future (past a minute of clock skew): not a token this server made now.
    if (typeof payload.iat === 'number' && payload.iat > now.getTime() / 1000 + CLOCK_SKEW_SECONDS) return null;
    return { accountId: payload.acc, subject: payload.sub };
  } catch {
    return null;
  }
}

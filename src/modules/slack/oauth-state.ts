import { SignJWT, jwtVerify } from 'jose';
import type { Secrets } from '../../secrets.js';

/** Who an install is for: the user and the environment whose Slack app it uses. */
export interface SlackOauthState {
  accountId: string;
  envId: string;
  userId: string;
}

const ISSUER = 'clarion';
/** Not the account tokens' audience: a state is no credential for the API, and no API token is a state. */
const AUDIENCE = 'clarion-slack-oauth';
/** Time a user has to finish the install on Slack's page. */
export const STATE_TTL_SECONDS = 600;

/**
 * The `state` of Slack's authorize URL: a short-lived HS256 token naming the user, signed with
 * the server's key. Slack hands it back to the callback, which trusts the install to be for that
 * user only because Clarion signed it (it is the callback's only authority, and its CSRF guard).
 */
export function signSlackOauthState(secrets: Pick<Secrets, 'jwtKey'>, state: SlackOauthState, now: Date): Promise<string> {
  const iat = Math.floor(now.getTime() / 1000);
  return new SignJWT({ acc: state.accountId, env: state.envId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(state.userId)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt(iat)
    .setExpirationTime(iat + STATE_TTL_SECONDS)
    .sign(secrets.jwtKey);
}

/** The state's install, or null for a forged, expired or foreign one. */
export async function verifySlackOauthState(secrets: Pick<Secrets, 'jwtKey'>, token: string, now: Date): Promise<SlackOauthState | null> {
  try {
    const { payload } = await jwtVerify(token, secrets.jwtKey, { issuer: ISSUER, audience: AUDIENCE, algorithms: ['HS256'], currentDate: now, requiredClaims: ['exp', 'sub'] });
    if (typeof payload.acc !== 'string' || typeof payload.env !== 'string' || typeof payload.sub !== 'string') return null;
    return { accountId: payload.acc, envId: payload.env, userId: payload.sub };
  } catch {
    return null;
  }
}

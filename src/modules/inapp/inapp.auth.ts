import { createHmac } from 'node:crypto';
import type { Deps } from '../../deps.js';
import { AppError } from '../../errors.js';
import { safeEqual } from '../../secrets.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import type { EnvironmentsRepository } from '../environments/environments.repository.js';
import type { InappScope } from './inapp.repository.js';

/** The user hash in-app clients send in secure mode: base64(HMAC-SHA256(clientSecret, userId)). */
export function userHash(clientSecret: string, userId: string): string {
  return createHmac('sha256', clientSecret).update(userId).digest('base64');
}

export interface InappCredentials {
  clientId: string;
  userId: string;
  hash?: string;
}

export const inappUnauthorized = (message: string) =>
  new AppError(
    'UNAUTHORIZED',
    message,
    'In-app clients send Basic base64(clientId:userId[:userHash]) or, on the websocket, ?envId=<clientId>&userId=...&userIdHash=...; in secure mode userHash is base64(HMAC-SHA256(clientSecret, userId)).',
  );

/** A SHA-256 digest in base64 is 44 characters ending in "=": never mistaken for part of a userId in practice. */
const HASH_SHAPE = /^[A-Za-z0-9+/]{43}=$/;

/**
 * Reads `Basic base64(clientId:userId[:hash])`. When the route names the user (`expectedUserId`),
 * userIds containing ":" are read exactly; otherwise a trailing hash-shaped segment is the hash.
 * Returns null when the header is not Basic.
 */
export function parseInappBasic(header: string | undefined, expectedUserId?: string): InappCredentials | null {
  const match = /^basic\s+(\S+)\s*$/i.exec(header ?? '');
  if (!match) return null;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) throw inappUnauthorized('Basic credentials must be clientId:userId or clientId:userId:userHash.');
  // As everywhere else a NUL is refused at the boundary (PostgreSQL cannot take it in a query).
  if (decoded.includes('\0')) throw inappUnauthorized('Basic credentials must not contain a NUL character.');
  const clientId = decoded.slice(0, colon);
  const rest = decoded.slice(colon + 1);
  if (expectedUserId !== undefined) {
    if (rest === expectedUserId) return { clientId, userId: rest };
    if (rest.startsWith(`${expectedUserId}:`)) return { clientId, userId: expectedUserId, hash: rest.slice(expectedUserId.length + 1) };
    throw inappUnauthorized('The credentials are for another user than the one in the path.');
  }
  const last = rest.lastIndexOf(':');
  if (last > 0 && HASH_SHAPE.test(rest.slice(last + 1))) return { clientId, userId: rest.slice(0, last), hash: rest.slice(last + 1) };
  return { clientId, userId: rest };
}

/** Authenticates an in-app end user: a known clientId, a userId, and in secure mode the right user hash. */
export class InappAuthenticator {
  constructor(
    private readonly deps: Deps,
    private readonly environments: EnvironmentsRepository,
  ) {}

  async authenticate(credentials: Partial<InappCredentials>): Promise<InappScope> {
    const { clientId, userId, hash } = credentials;
    if (!clientId) throw inappUnauthorized('Missing clientId.');
    if (!userId) throw inappUnauthorized('Missing userId.');
    const env = await this.environments.findForAuthentication(clientId);
    if (!env) throw inappUnauthorized('Unknown clientId.');
    if (env.secure_mode === 1) {
      if (!hash) throw inappUnauthorized('This environment is in secure mode: the user hash is required.');
      const expected = userHash(this.deps.secrets.decrypt(env.client_secret_enc), userId);
      if (!safeEqual(expected, hash)) throw inappUnauthorized('Wrong user hash for this userId.');
    }
    return { accountId: env.account_id, envId: env.client_id, userId };
  }

  /**
   * The user that server credentials act for. Secret credentials may name any user of their
   * environment; the environment's public key stands in for its clientId, so it must prove the
   * user as the in-app client does (the user hash, in secure mode).
   */
  async actingFor(auth: AuthContext, userId: string, hash: string | undefined): Promise<InappScope> {
    const envId = requireEnv(auth);
    if (!auth.publicKey) return { accountId: auth.accountId, envId, userId };
    return this.authenticate({ clientId: envId, userId, ...(hash ? { hash } : {}) });
  }

  /**
   * Authenticates the in-app client on a `/{clientId}/users/{userId}/...` path: its Basic
   * credentials must name that clientId and that user. Null when the header is not Basic.
   */
  async authenticatePath(authorization: string | undefined, clientId: string, userId: string): Promise<InappScope | null> {
    const credentials = parseInappBasic(authorization, userId);
    if (!credentials) return null;
    if (credentials.clientId !== clientId) throw inappUnauthorized('The credentials are for another clientId than the one in the path.');
    return this.authenticate(credentials);
  }
}

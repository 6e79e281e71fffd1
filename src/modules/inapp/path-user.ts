import type { FastifyRequest } from 'fastify';
import type { AuthService } from '../auth/auth.service.js';
import { type InappAuthenticator, inappUnauthorized } from './inapp.auth.js';

/**
 * The onRequest hook of a `/{clientId}/users/{userId}/...` route of the published clients: the
 * caller's Basic clientId:userId[:userHash] must name that clientId and that user (the hash is
 * checked in secure mode); the user becomes `req.inappScope` (decorated by inappRoutes).
 */
export function pathUserAuth(authenticator: InappAuthenticator) {
  return async (req: FastifyRequest): Promise<void> => {
    const { clientId, userId } = req.params as { clientId: string; userId: string };
    const scope = await authenticator.authenticatePath(req.headers.authorization, clientId, userId);
    if (!scope) throw inappUnauthorized('Missing in-app credentials.');
    req.inappScope = scope;
  };
}

/**
 * The onRequest hook of a `/users/{userId}/...` route of the pingram SDK's UserApi: server
 * credentials (an API key, Basic clientId:clientSecret, a JWT with `?envId=`) act for the path's
 * user; the environment's public key too, with `?userIdHash=` in secure mode, as the in-app
 * client would (InappAuthenticator.actingFor). The user becomes `req.inappScope`.
 */
export function serverForPathUser(auth: AuthService, authenticator: InappAuthenticator) {
  return async (req: FastifyRequest): Promise<void> => {
    const { userId } = req.params as { userId: string };
    const query = req.query as { envId?: unknown; userIdHash?: unknown };
    const caller = await auth.authenticate(req.headers.authorization, typeof query.envId === 'string' ? query.envId : undefined, { publicKey: true });
    req.inappScope = await authenticator.actingFor(caller, userId, typeof query.userIdHash === 'string' && query.userIdHash !== '' ? query.userIdHash : undefined);
  };
}

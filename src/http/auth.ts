import type { AuthContext } from '../modules/auth/auth.service.js';
import { AuthService } from '../modules/auth/auth.service.js';
import type { Deps } from '../deps.js';
import type { App } from './types.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set for routes with the default 'account' auth; other routes authenticate themselves. */
    auth: AuthContext;
  }
}

export function installAuth(app: App, deps: Deps): AuthService {
  const service = new AuthService(deps);
  app.decorateRequest('auth', null as unknown as AuthContext);
  app.addHook('onRequest', async (request) => {
    const mode = request.routeOptions.config?.auth ?? 'account';
    // Unknown routes fall through to the 404 handler without asking for credentials.
    if (mode !== 'account' || request.is404) return;
    const envId = (request.query as Record<string, unknown> | undefined)?.envId;
    request.auth = await service.authenticate(request.headers.authorization, typeof envId === 'string' ? envId : undefined);
  });
  return service;
}

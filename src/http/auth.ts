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
  app.addHook('onRequest', (request, _reply, done) => {
    const mode = request.routeOptions.config?.auth ?? 'account';
    // Unknown routes fall through to the 404 handler without asking for credentials.
    if (mode !== 'account' || request.is404) return done();
    const envIdParam = (request.query as Record<string, unknown> | undefined)?.envId;
    const envId = typeof envIdParam === 'string' ? envIdParam : undefined;
    const cached = service.cachedApiKey(request.headers.authorization, envId);
    if (cached) {
      request.auth = cached;
      return done();
    }
    service.authenticate(request.headers.authorization, envId).then((auth) => {
      request.auth = auth;
      done();
    }, done);
  });
  return service;
}

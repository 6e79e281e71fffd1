import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext } from '../modules/auth/auth.service.js';
import { type AuthService, environmentRequired } from '../modules/auth/auth.service.js';
import { AppError, invalid } from '../errors.js';
import { type Permission, permissionOf, routeAuthOf } from './permissions.js';
import type { App } from './types.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set for routes with the default 'account' auth; other routes authenticate themselves. */
    auth: AuthContext;
  }
}

/** OpenAPI `security` of each permission; the server-credential ones use the document's default. */
const SECURITY: Partial<Record<Permission, unknown[]>> = { public: [], 'end-user': [{ inappUser: [] }] };

/**
 * The one place where the permission matrix is enforced: every route gets its permission when it
 * is added (a route the matrix does not list stops the server from starting), and every request
 * to a route that takes server credentials is authenticated and checked against it here.
 */
export function installAuth(app: App, service: AuthService): AuthService {
  app.decorateRequest('auth', null as unknown as AuthContext);

  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const permission = permissionOf(methods[0], route.url);
    for (const method of methods) {
      if (permissionOf(method, route.url) !== permission) throw new Error(`Route ${route.url}: its methods need one permission each.`);
    }
    const auth = routeAuthOf(permission);
    if (route.config?.auth !== undefined && route.config.auth !== auth) {
      throw new Error(`Route ${methods.join(',')} ${route.url} declares auth "${route.config.auth}" but the permission matrix says ${permission}.`);
    }
    route.config = { ...route.config, auth, permission };
    const security = SECURITY[permission];
    const description = [route.schema?.description, `Permission: \`${permission}\` (README: Authentication).`].filter(Boolean).join('\n\n');
    route.schema = { ...route.schema, description, 'x-permission': permission, ...(security ? { security } : {}) } as typeof route.schema;
    // A route-level hook, first of the route's own, after the app's: only the routes that take
    // server credentials pay for it, and it knows its permission without reading the route's
    // options per request (request.routeOptions builds a new object on every read). Unknown
    // routes fall through to the 404 handler without asking for credentials.
    if (auth === 'account') {
      const own = route.onRequest === undefined ? [] : Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest];
      route.onRequest = [authenticateFor(service, permission), ...own] as typeof route.onRequest;
    }
  });
  return service;
}

/** The onRequest hook of a route with this permission: authenticates the caller and checks the permission. */
function authenticateFor(service: AuthService, permission: Permission) {
  // Public keys pass only where a browser may call (AuthService refuses them elsewhere).
  const options = { publicKey: permission === 'browser' };
  return (request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void => {
    let envId: string | undefined;
    try {
      envId = selectedEnvironment(request.params, request.query, permission);
    } catch (err) {
      return done(err as Error);
    }
    const cached = service.cachedApiKey(request.headers.authorization, envId);
    if (cached) {
      request.auth = cached;
      return done(refusal(permission, cached));
    }
    service.authenticate(request.headers.authorization, envId, options).then((auth) => {
      request.auth = auth;
      done(refusal(permission, auth));
    }, done);
  };
}

/**
 * The environment the caller names: `?envId=`, or for an environment operation whose path starts
 * with the environment (the older `/{clientId}/sender`), that path segment.
 */
function selectedEnvironment(params: unknown, query: unknown, permission: Permission): string | undefined {
  const pathClientId = (params as Record<string, unknown> | undefined)?.clientId;
  if ((permission === 'environment' || permission === 'browser') && typeof pathClientId === 'string') return pathClientId;
  const envId = (query as Record<string, unknown> | undefined)?.envId;
  // Given twice, it is refused as such (the routes' schemas take one), not as no environment at all.
  if (Array.isArray(envId)) throw invalid('envId is given more than once.', 'Name one environment: ?envId=<clientId>.');
  return typeof envId === 'string' ? envId : undefined;
}

/** Why these credentials may not call a route with this permission, or undefined when they may. */
function refusal(permission: Permission, auth: AuthContext): AppError | undefined {
  if (permission === 'account' && auth.scope !== 'account') {
    return new AppError(
      'FORBIDDEN',
      'This operation manages the account, and these credentials act only inside one environment.',
      'Use an account-scope API key (the key `clarion init` prints, or POST /keys with scope "account") or an account JWT.',
    );
  }
  if ((permission === 'environment' || permission === 'browser') && auth.envId === null) {
    return environmentRequired();
  }
  return undefined;
}

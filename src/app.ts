import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, LogController } from 'fastify';
import type { Deps } from './deps.js';
import { installAuth } from './http/auth.js';
import { installErrorHandling } from './http/error-handler.js';
import { installMetrics } from './http/metrics.js';
import { ErrorBodySchema } from './http/schemas.js';
import type { App } from './http/types.js';
import { accountRoutes } from './modules/accounts/accounts.routes.js';
import { environmentRoutes } from './modules/environments/environments.routes.js';
import { keyRoutes } from './modules/keys/keys.routes.js';
import { systemRoutes } from './modules/system/system.routes.js';
import { inappRoutes } from './modules/inapp/inapp.routes.js';
import { outboxRoutes } from './modules/outbox/outbox.routes.js';
import { templateRoutes } from './modules/templates/templates.routes.js';
import { userRoutes } from './modules/users/users.routes.js';

/** Builds the HTTP application over already-built dependencies (tests use the same function). */
export async function buildApp(deps: Deps): Promise<App> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // Each request's id is the trackingId of its error body and of its log lines.
    genReqId: () => randomUUID(),
    logController: new LogController({ requestIdLogLabel: 'trackingId' }),
    requestIdHeader: false,
    bodyLimit: deps.config.bodyLimitBytes,
    // Route matching ignores a trailing slash, as API clients often add one.
    routerOptions: { ignoreTrailingSlash: true },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true, allErrors: false } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Some published clients send JSON bodies without a Content-Type header; read those as JSON too.
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      const err = new SyntaxError('invalid JSON body');
      done(err, undefined);
    }
  });

  app.addSchema(ErrorBodySchema);
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: { title: 'Clarion', version: '0.1.0', description: 'Self-hostable notification service' },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'API key (clarion_sk_...) or account JWT' },
          basic: { type: 'http', scheme: 'basic', description: 'environment clientId:clientSecret' },
          inappUser: { type: 'http', scheme: 'basic', description: 'in-app clients: clientId:userId:userHash (hash needed in secure mode)' },
        },
      },
      security: [{ bearer: [] }, { basic: [] }],
    },
  });

  // Document each route's credentials in OpenAPI from its auth mode.
  app.addHook('onRoute', (route) => {
    const mode = route.config?.auth ?? 'account';
    if (mode === 'account') return;
    route.schema = { ...route.schema, security: mode === 'none' ? [] : [{ inappUser: [] }] };
  });

  installErrorHandling(app);
  const metrics = installMetrics(app);
  installAuth(app, deps);

  systemRoutes(app, deps, metrics);
  accountRoutes(app, deps);
  environmentRoutes(app, deps);
  keyRoutes(app, deps);
  userRoutes(app, deps);
  templateRoutes(app, deps);
  outboxRoutes(app, deps);
  await inappRoutes(app, deps);

  return app;
}

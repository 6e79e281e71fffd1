import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyBaseLogger, LogController } from 'fastify';
import type { Deps } from './deps.js';
import { installAuth } from './http/auth.js';
import { installCors } from './http/cors.js';
import { MAX_PATH_SEGMENT_LENGTH, clientErrorHandler, frameworkErrors, installErrorHandling } from './http/error-handler.js';
import { parseJsonBody } from './http/json-body.js';
import { docsOptions, openApiOptions } from './http/openapi.js';
import { installMetrics } from './http/metrics.js';
import { registerDeliveryMetrics } from './modules/delivery/delivery-metrics.js';
import { registerQueueMetrics } from './queue/queue-metrics.js';
import { installRateLimits } from './http/rate-limit.js';
import { installRequestLog, lazyChildLogger } from './http/request-logger.js';
import { ErrorBodySchema, installFormats } from './http/schemas.js';
import type { App } from './http/types.js';
import { buildValidator } from './http/validator.js';
import { accountRoutes } from './modules/accounts/accounts.routes.js';
import { publicComponentRoutes } from './modules/components/components.routes.js';
import { environmentRoutes } from './modules/environments/environments.routes.js';
import { keyRoutes } from './modules/keys/keys.routes.js';
import { logRoutes } from './modules/logs/logs.routes.js';
import { apnRoutes } from './modules/push/apn.routes.js';
import { fcmRoutes } from './modules/push/fcm.routes.js';
import { webPushRoutes } from './modules/push/web-push.routes.js';
import { retractRoutes } from './modules/sending/retract.routes.js';
import { sendingRoutes } from './modules/sending/sending.routes.js';
import { slackDirectoryRoutes } from './modules/slack/slack-directory.routes.js';
import { slackAppRoutes, slackUserOauthRoutes } from './modules/slack/slack-oauth.routes.js';
import { slackRoutes } from './modules/slack/slack.routes.js';
import { telephonyRoutes } from './modules/telephony/telephony.routes.js';
import { systemRoutes } from './modules/system/system.routes.js';
import { inappRoutes } from './modules/inapp/inapp.routes.js';
import { templateRoutes } from './modules/templates/templates.routes.js';
import { clientUserRoutes } from './modules/users/client-users.routes.js';
import { userRoutes } from './modules/users/users.routes.js';
import { devCarrierRoutes } from './local-providers/dev-carrier/dev-carrier.routes.js';
import { mailCatcherRoutes } from './local-providers/mail-catcher/mail-catcher.routes.js';
import { emailSettingsRoutes } from './modules/email/email-settings.routes.js';
import { addressRoutes } from './modules/addresses/addresses.routes.js';
import { domainRoutes } from './modules/domains/domains.routes.js';
import { webhookRoutes } from './modules/webhooks/webhooks.routes.js';
import { broadcastRoutes } from './modules/broadcasts/broadcasts.routes.js';
import { preferenceRoutes } from './modules/preferences/preferences.routes.js';
import { subNotificationRoutes } from './modules/preferences/sub-notifications.routes.js';
import { engagementRoutes } from './modules/engagement/engagement.routes.js';
import { hitCounterFor } from './modules/rate-limits/hit-counters.js';
import type { Services } from './services.js';

/**
 * Builds the HTTP application over already-built dependencies and services (tests use the same
 * function): each module's routes get the services they call, and construct none.
 */
export async function buildApp(deps: Deps, services: Services): Promise<App> {
  // Fastify infers its logger type from loggerInstance; the routes are typed for the base logger.
  const loggerInstance: FastifyBaseLogger = deps.logger;
  const app = Fastify({
    loggerInstance,
    childLoggerFactory: lazyChildLogger,
    // Each request's id is the trackingId of its error body and of its log lines.
    genReqId: () => deps.ids.uuid(),
    // One line per request instead of Fastify's two (installRequestLog).
    logController: new LogController({ requestIdLogLabel: 'trackingId', disableRequestLogging: true }),
    requestIdHeader: false,
    bodyLimit: deps.config.bodyLimitBytes,
    // Every answer the server writes carries the Error body, also those written before routing
    // (bad escapes, over-long path segments) and by Node's HTTP parser (431, bad request line or chunk).
    frameworkErrors,
    clientErrorHandler: clientErrorHandler(deps.ids),
    // Without Host, Node would answer an empty 400 itself; the onRequest check answers the Error body.
    http: { requireHostHeader: false },
    return503OnClosing: false,
    // request.ip (rate limits, request lines) is the client's, not a reverse proxy's: CLARION_TRUST_PROXY.
    trustProxy: deps.config.trustProxy,
    // Route matching ignores a trailing slash, as API clients often add one, and a doubled slash
    // (a client's base URL ending in "/" joined with a path starting with one: //logs/tail).
    // Path ids (user ids up to 256 chars, URL-encoded) may be longer than Fastify's default 100.
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, maxParamLength: MAX_PATH_SEGMENT_LENGTH },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true, allErrors: false }, onCreate: installFormats },
    // Bodies are validated without coercion (http/validator.ts); parameters and query strings with.
    schemaController: { compilersFactory: { buildValidator: buildValidator() } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Every body of this API is JSON. Clients send an empty body with Content-Type:
  // application/json on DELETE (the official SDK does), and some send JSON without any or with
  // another Content-Type: all are read as JSON, empty as none.
  app.removeContentTypeParser('application/json');
  const parseJson = (_req: unknown, body: string | Buffer, done: (err: Error | null, body?: unknown) => void) => {
    try {
      done(null, parseJsonBody(typeof body === 'string' ? body : String(body)));
    } catch (err) {
      done(err as Error, undefined);
    }
  };
  // The published in-app client posts JSON through fetch() with a string body: text/plain.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser(['application/json', 'text/plain'], { parseAs: 'string' }, parseJson);
  app.addContentTypeParser('*', { parseAs: 'string' }, parseJson);

  app.addSchema(ErrorBodySchema);
  await app.register(swagger, openApiOptions(deps.config));

  // Workers in this process give way while the API is busy (see ApiLoad).
  app.addHook('onRequest', (_request, _reply, done) => {
    deps.load.requestReceived();
    done();
  });

  installRequestLog(app, deps.requestLines);
  installErrorHandling(app);
  const metrics = installMetrics(app);
  registerDeliveryMetrics(metrics, deps.ledger.outcomes);
  registerQueueMetrics(metrics, deps.queue);
  installAuth(app, services.auth);
  // After installAuth: the address limit runs before authentication, the credential's after it.
  installRateLimits(app, deps.config, hitCounterFor(deps.storage, deps.clock));
  // /docs renders the document; its routes live in a scope of their own and add no hooks to the API's.
  await app.register(swaggerUi, docsOptions);

  systemRoutes(app, deps, metrics);
  accountRoutes(app, services.accounts);
  environmentRoutes(app, services.environments);
  keyRoutes(app, services.keys);
  userRoutes(app, services.users);
  templateRoutes(app, services);
  emailSettingsRoutes(app, services.emailSettings);
  // The routes a browser calls (the in-app client's, and what a public key may read), in a scope of their own so that CORS's hook
  // runs for them only: on every route it cost about 126k instructions per POST /send (callgrind).
  await app.register(async (scope) => {
    const browser = scope as unknown as App;
    await installCors(browser, deps.config.corsOrigins);
    await inappRoutes(browser, deps, services);
    preferenceRoutes(browser, services);
    webPushRoutes(browser, services);
    clientUserRoutes(browser, services);
    slackDirectoryRoutes(browser, services);
    slackUserOauthRoutes(browser, services);
    publicComponentRoutes(browser, services.components);
  });
  subNotificationRoutes(app, services.subNotifications);
  sendingRoutes(app, services.sending);
  retractRoutes(app, services.retract);
  logRoutes(app, deps, services.logs);
  await telephonyRoutes(app, services);
  apnRoutes(app, services.apnSettings);
  fcmRoutes(app, services.fcmSettings);
  slackRoutes(app, services.slackSettings);
  slackAppRoutes(app, services.slackOauth);
  webhookRoutes(app, services.webhooks);
  await engagementRoutes(app, services.engagement);
  domainRoutes(app, services.domains);
  broadcastRoutes(app, services.broadcasts);
  addressRoutes(app, services.addresses, services.inbound);
  // Local stand-ins for providers: the mail catcher always (mail goes there without SMTP), the
  // development carrier when no Twilio credentials are configured.
  mailCatcherRoutes(app, services.mailCatcher);
  if (services.devCarrier) await devCarrierRoutes(app, services.devCarrier);

  return app;
}

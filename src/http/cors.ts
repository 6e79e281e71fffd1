import cors from '@fastify/cors';
import type { Config } from '../config.js';
import type { App } from './types.js';

/**
 * What a browser calls: the in-app client's `/{clientId}/users/{userId}/<resource>` (its only URL
 * shape: notifications, preferences, account metadata, Slack channels), and what the pingram
 * SDK's UserApi calls with a public key: `/user/inapp`, `/users/account-metadata`,
 * `/users/{userId}/slack-channels`, `/users/{userId}/slack-oauth`, and `/components/public`. The
 * server API (secret keys, account tokens) answers no CORS: a browser must never hold those.
 */
const BROWSER_PATH =
  /^\/[^/?]+\/users\/[^/?]+(?:[/?]|$)|^\/user\/inapp(?:[/?]|$)|^\/users\/(?:account-metadata|[^/?]+\/slack-(?:channels|oauth))(?:\?|$)|^\/components\/public(?:\?|$)/;

/**
 * CORS with @fastify/cors on the browser routes, for the origins of CLARION_CORS_ORIGINS (`*` by
 * default: the in-app client authenticates with its own header, not cookies, so no credentials
 * mode is needed). `app` is the scope of the browser routes (app.ts): the plugin's hook costs
 * every request of its scope, so the server API is kept out of it. The preflight's answer comes
 * from the hook, before authentication: a preflight carries no credentials.
 */
export async function installCors(app: App, origins: Config['corsOrigins']): Promise<void> {
  if (origins === 'off') return;
  await app.register(cors, {
    hook: 'onRequest',
    delegator: (request, callback) => {
      if (!BROWSER_PATH.test(request.url)) return callback(null, { origin: false });
      callback(null, {
        origin: origins === '*' ? '*' : origins,
        methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
        allowedHeaders: ['Authorization', 'Content-Type'],
        maxAge: 600,
        // A strict preflight answers an OPTIONS without Origin or Access-Control-Request-Method
        // with a text/plain 400 of the plugin's own, not the Error body; such an OPTIONS is
        // answered as a preflight (204, the same headers), which tells its sender all it could ask.
        strictPreflight: false,
      });
    },
  });
}

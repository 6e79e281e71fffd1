/** How a route authenticates its caller. */
export type RouteAuth =
  /** API key, environment Basic credentials or a JWT acting on an account (the default). */
  | 'account'
  /** In-app end users: clientId + userId (+ user hash in secure mode). */
  | 'inapp'
  /** No credentials: health, metrics, OpenAPI, provider callbacks that verify their own signatures. */
  | 'none';

/**
 * Who may call an operation (README: Authentication, permission matrix).
 *
 * - `public`: no credentials (health, OpenAPI, metrics, provider callbacks and the development
 *   carrier's Twilio-protocol REST API, which check their own signatures or credentials).
 * - `end-user`: in-app end users (Basic clientId:userId[:userHash]); the in-app routes also take
 *   server credentials acting for a named user, under the `environment` rules.
 * - `environment`: acts inside one environment. An environment-scope API key and Basic
 *   clientId:clientSecret act in their own environment only; an account-scope API key acts in its
 *   own environment or the one named by `?envId=`; a JWT needs `?envId=`.
 * - `browser`: what a web page may call besides the end-user routes: the `environment` rules, and
 *   also the environment's public key (API key of keyType `public`), which every other server
 *   route refuses with 403 (README: Public keys).
 * - `account-read`: reads what the whole account shares (its plan and usage, its phone numbers):
 *   any credential of the account.
 * - `account`: manages the account, its environments and keys: an account-scope API key or a JWT.
 */
export type Permission = 'public' | 'end-user' | 'browser' | 'environment' | 'account-read' | 'account';

/**
 * Every route of the server, keyed `METHOD path` with Fastify's `:param` syntax. A route missing
 * here fails at startup (see permissionOf), so a new route cannot skip the matrix.
 */
export const PERMISSIONS: Readonly<Record<string, Permission>> = {
  // System
  'GET /status': 'public',
  'GET /metrics': 'public',
  'GET /openapi.json': 'public',
  // The docs page (@fastify/swagger-ui): the page, its document and its bundled assets.
  'GET /docs': 'public',
  'GET /docs/json': 'public',
  'GET /docs/yaml': 'public',
  'GET /docs/static/index.html': 'public',
  'GET /docs/static/swagger-initializer.js': 'public',
  'GET /docs/static/*': 'public',
  // CORS preflights of the in-app client's routes (http/cors.ts): a preflight carries no credentials.
  'OPTIONS *': 'public',

  // Account, environments, keys
  'GET /account': 'account-read',
  'POST /account': 'account',
  'PATCH /account': 'account',
  'GET /environments': 'account',
  'POST /environments': 'account',
  'PATCH /environments/:clientId': 'account',
  'GET /keys': 'account',
  'POST /keys': 'account',
  'DELETE /keys/:keyId': 'account',

  // Users
  'POST /users/:userId': 'environment',
  'GET /users/:userId': 'environment',
  'DELETE /users/:userId': 'environment',
  'GET /users': 'environment',
  'DELETE /user_suppression/:userId/channel/:channel': 'environment',

  // Email outbox and SMTP settings
  'GET /outbox': 'environment',
  'GET /outbox/:id': 'environment',
  'GET /outbox/:id/raw': 'environment',
  'GET /settings/email/smtp': 'environment',
  'PUT /settings/email/smtp': 'environment',
  'DELETE /settings/email/smtp': 'environment',
  'GET /settings/email/tracking': 'environment',
  'PUT /settings/email/tracking': 'environment',

  // Email engagement: the signed token in the path is the authority (modules/engagement)
  'GET /e/open/:token': 'public',
  'GET /e/click/:token': 'public',
  'GET /unsubscribe/:token': 'public',
  'POST /unsubscribe/:token': 'public',

  // Notification types, components, templates
  'GET /types': 'environment',
  'POST /types': 'environment',
  'GET /types/:notificationId': 'environment',
  'PATCH /types/:notificationId': 'environment',
  'DELETE /types/:notificationId': 'environment',
  'GET /components': 'environment',
  'POST /components': 'environment',
  'GET /components/public': 'browser',
  'GET /components/:componentId': 'environment',
  'PATCH /components/:componentId': 'environment',
  'DELETE /components/:componentId': 'environment',
  'GET /notifications/:notificationId/:channel/templates': 'environment',
  'POST /notifications/:notificationId/:channel/templates': 'environment',
  'PATCH /notifications/:notificationId/:channel/templates/default-selection': 'environment',
  'GET /notifications/:notificationId/:channel/templates/:templateId': 'environment',
  'PATCH /notifications/:notificationId/:channel/templates/:templateId': 'environment',
  'DELETE /notifications/:notificationId/:channel/templates/:templateId': 'environment',

  // In-app end users (and their websocket)
  'GET /user/inapp': 'end-user',
  'PATCH /user/inapp': 'end-user',
  'GET /user/inapp/unread': 'end-user',
  'PATCH /user/inapp/unread': 'end-user',
  'GET /:clientId/users/:userId/notifications/INAPP_WEB': 'end-user',
  'PATCH /:clientId/users/:userId/notifications/INAPP_WEB': 'end-user',
  'GET /:clientId/users/:userId/notifications/INAPP_WEB/unread': 'end-user',
  'PATCH /:clientId/users/:userId/notifications/INAPP_WEB/unread': 'end-user',
  'GET /': 'end-user',
  'GET /ws': 'end-user',
  'GET /users/account-metadata': 'end-user',
  'GET /:clientId/users/:userId/account_metadata': 'end-user',
  // The signed-in user's own record and Slack workspace (in-app client identify, user.get, slack.*; older server SDK identifyUser)
  'POST /:clientId/users/:userId': 'end-user',
  'GET /:clientId/users/:userId': 'end-user',
  'GET /:clientId/users/:userId/slack/channels': 'end-user',
  // The pingram SDK's UserApi on Slack: server credentials, or the public key, acting for the path's user
  'GET /users/:userId/slack-channels': 'end-user',
  'GET /users/:userId/slack-oauth': 'end-user',
  'POST /users/:userId/slack-oauth': 'end-user',

  // User preferences (modules/preferences): the in-app client's, the older server SDK's, API keys'
  'GET /:clientId/users/:userId/preferences': 'end-user',
  'POST /:clientId/users/:userId/preferences': 'end-user',
  // Server credentials of the path's environment, or the user's own Basic (the route checks which).
  'DELETE /:clientId/users/:userId/preferences': 'end-user',
  'POST /:clientId/user_preferences/:userId': 'environment',
  'GET /users/:userId/preferences': 'environment',
  'POST /user_preferences/:userId': 'environment',
  'DELETE /users/:userId/preferences': 'environment',
  // Sub-notifications: the older server SDK's (path clientId) and API keys'
  'PUT /:clientId/notifications/:notificationId/subNotifications/:subNotificationId': 'environment',
  'DELETE /:clientId/notifications/:notificationId/subNotifications/:subNotificationId': 'environment',
  'PUT /notifications/:notificationId/subNotifications/:subNotificationId': 'environment',
  'DELETE /notifications/:notificationId/subNotifications/:subNotificationId': 'environment',

  // Sending and logs
  'POST /send': 'environment',
  'POST /email': 'environment',
  'POST /sms': 'environment',
  'POST /sender/test/email': 'environment',
  'POST /:clientId/sender': 'environment',
  'POST /:clientId/sender/retract': 'environment',
  'PUT /sender/scheduler/:trackingId': 'environment',
  'DELETE /sender/scheduler/:trackingId': 'environment',
  'PATCH /:clientId/schedule/:trackingId': 'environment',
  'DELETE /:clientId/schedule/:trackingId': 'environment',
  'GET /logs/retention': 'environment',
  'GET /logs': 'environment',
  'GET /logs/tail': 'environment',
  'GET /logs/query/:queryId': 'environment',
  'GET /logs/:trackingIds': 'environment',
  'POST /logs/bulk': 'environment',
  'POST /logs/query': 'environment',
  'POST /:clientId/logs/query': 'environment',

  // Sender domains belong to the account (every environment sends from them)
  'GET /domains': 'account-read',
  'POST /domains': 'account',
  'DELETE /domains/:sender': 'account',
  'POST /domains/:sender/verify': 'account',

  // Telephony: the account's numbers, carrier callbacks, the development carrier
  'GET /numbers/list': 'account-read',
  'GET /numbers/released': 'account-read',
  'GET /numbers/available': 'account-read',
  'POST /numbers/order': 'account',
  'DELETE /numbers/:phoneNumber': 'account',
  'POST /telephony/twilio/sms-status': 'public',
  'POST /telephony/twilio/call-status': 'public',
  'POST /telephony/twilio/inbound': 'public',
  'POST /dev-carrier/2010-04-01/Accounts/:accountSid/Messages.json': 'public',
  'POST /dev-carrier/2010-04-01/Accounts/:accountSid/Calls.json': 'public',
  'GET /dev-carrier/2010-04-01/Accounts/:accountSid/Messages.json': 'public',
  'GET /dev-carrier/2010-04-01/Accounts/:accountSid/Calls.json': 'public',
  'GET /dev-carrier/2010-04-01/Accounts/:accountSid/Messages/:resource': 'public',
  'GET /dev-carrier/2010-04-01/Accounts/:accountSid/Calls/:resource': 'public',
  'GET /dev-carrier/messages': 'environment',
  'GET /dev-carrier/calls': 'environment',
  'POST /dev-carrier/inbound': 'environment',

  // Push and Slack settings
  'GET /settings/push/web': 'environment',
  'GET /settings/push/apn': 'environment',
  'PUT /settings/push/apn': 'environment',
  'DELETE /settings/push/apn': 'environment',
  'GET /settings/push/fcm': 'environment',
  'PUT /settings/push/fcm': 'environment',
  'DELETE /settings/push/fcm': 'environment',
  'GET /settings/slack': 'environment',
  'PUT /settings/slack': 'environment',
  'DELETE /settings/slack': 'environment',
  'GET /settings/slack/app': 'environment',
  'PUT /settings/slack/app': 'environment',
  'DELETE /settings/slack/app': 'environment',
  // Slack's OAuth redirect: the signed state is the authority (modules/slack/oauth-state.ts)
  'GET /slack/oauth/callback': 'public',

  // Webhooks
  'POST /webhooks': 'environment',
  'GET /webhooks': 'environment',
  'GET /webhooks/events': 'environment',
  'PUT /webhooks/events': 'environment',
  'DELETE /webhooks/events': 'environment',
  'GET /webhooks/:endpointId': 'environment',
  'PUT /webhooks/:endpointId': 'environment',
  'DELETE /webhooks/:endpointId': 'environment',
  'POST /webhooks/:endpointId/secret': 'environment',
  'GET /webhooks/:endpointId/attempts': 'environment',
  'POST /webhooks/:endpointId/events/:eventId/replay': 'environment',
  'POST /webhooks/:endpointId/recover': 'environment',

  // Email broadcasts
  'POST /broadcasts': 'environment',
  'GET /broadcasts': 'environment',
  'POST /broadcasts/audience/preview': 'environment',
  'GET /broadcasts/:broadcastId': 'environment',
  'PATCH /broadcasts/:broadcastId': 'environment',
  'DELETE /broadcasts/:broadcastId': 'environment',
  'POST /broadcasts/:broadcastId/schedule': 'environment',
  'POST /broadcasts/:broadcastId/send': 'environment',
  'POST /broadcasts/:broadcastId/pause': 'environment',
  'POST /broadcasts/:broadcastId/resume': 'environment',
  'POST /broadcasts/:broadcastId/cancel': 'environment',
  'POST /broadcasts/:broadcastId/archive': 'environment',
  'POST /broadcasts/:broadcastId/unarchive': 'environment',
  'POST /broadcasts/:broadcastId/test': 'environment',
  'GET /broadcasts/:broadcastId/metrics': 'environment',
  'GET /broadcasts/:broadcastId/recipients': 'environment',
  'GET /broadcasts/:broadcastId/transitions': 'environment',

  // Inbound email addresses and what they received
  'POST /addresses': 'environment',
  'GET /addresses': 'environment',
  'PATCH /addresses': 'environment',
  'DELETE /addresses/:fullAddress': 'environment',
  'GET /inbound-emails': 'environment',
  'GET /inbound-emails/:inboundId': 'environment',
};

/** How a route with this permission authenticates its caller. */
export function routeAuthOf(permission: Permission): RouteAuth {
  return permission === 'public' ? 'none' : permission === 'end-user' ? 'inapp' : 'account';
}

/**
 * The permission of a route (HEAD routes are their GET's). Throws for a route the matrix does
 * not list: the server refuses to start rather than serve it with no rule.
 */
export function permissionOf(method: string, url: string): Permission {
  const key = `${method === 'HEAD' ? 'GET' : method} ${url.length > 1 ? url.replace(/\/$/, '') : url}`;
  const permission = PERMISSIONS[key];
  if (!permission) throw new Error(`Route "${key}" is not in the permission matrix (src/http/permissions.ts).`);
  return permission;
}

/**
 * The `operationId` of every operation of the OpenAPI document, given in one place (openapi.ts
 * applies it to every route) so that route files need not name their operations.
 *
 * Operations the `pingram` SDK calls carry that SDK's method name, so generated clients and the
 * docs page speak the same words as the SDK; where the SDK reuses a name in two namespaces
 * (`email.send`, `sms.send`, `numbers.list`), the namespace is added. Keys use Fastify's `:param`
 * syntax, as the permission matrix does. Entries whose route does not exist (yet) name nothing.
 */
const SDK_OPERATION_IDS: Readonly<Record<string, string>> = {
  'GET /status': 'healthCheck',
  'POST /send': 'send',
  'POST /email': 'sendEmail',
  'POST /sms': 'sendSms',
  'POST /sender/test/email': 'testEmail',
  'PUT /sender/scheduler/:trackingId': 'updateSchedule',
  'DELETE /sender/scheduler/:trackingId': 'deleteSchedule',

  'GET /account': 'getAccountDetails',
  'POST /account': 'updateAccount',
  'GET /environments': 'listEnvironments',
  'POST /environments': 'createEnvironment',
  'PATCH /environments/:clientId': 'updateEnvironment',
  'GET /keys': 'listAPIKeys',
  'POST /keys': 'createAPIKey',
  'DELETE /keys/:keyId': 'revokeAPIKey',

  'GET /users': 'listUsers',
  'GET /users/:userId': 'getUser',
  'POST /users/:userId': 'identify',
  'DELETE /users/:userId': 'deleteUser',
  'DELETE /user_suppression/:userId/channel/:channel': 'removeUserFromSuppression',
  'GET /users/account-metadata': 'getAccountMetadata',
  'POST /users/:userId/slack-oauth': 'generateSlackOauthPath',
  'GET /users/:userId/slack-channels': 'getAvailableSlackChannels',
  'GET /user/inapp': 'getInAppNotifications',
  'PATCH /user/inapp': 'updateInAppNotificationStatus',
  'GET /user/inapp/unread': 'getInAppUnreadCount',
  'PATCH /user/inapp/unread': 'markInAppNotificationsAsSeen',

  'GET /types': 'listNotificationTypes',
  'POST /types': 'createNotificationType',
  'GET /types/:notificationId': 'getNotificationType',
  'PATCH /types/:notificationId': 'updateNotificationType',
  'DELETE /types/:notificationId': 'deleteNotificationType',
  'GET /components': 'listComponents',
  'POST /components': 'createComponent',
  'GET /components/public': 'listComponentsParsed',
  'GET /components/:componentId': 'getComponent',
  'PATCH /components/:componentId': 'patchComponent',
  'DELETE /components/:componentId': 'deleteComponent',
  'GET /notifications/:notificationId/:channel/templates': 'listTemplates',
  'POST /notifications/:notificationId/:channel/templates': 'createTemplate',
  'PATCH /notifications/:notificationId/:channel/templates/default-selection': 'setDefaultTemplate',
  'GET /notifications/:notificationId/:channel/templates/:templateId': 'getTemplate',
  'PATCH /notifications/:notificationId/:channel/templates/:templateId': 'updateTemplate',
  'DELETE /notifications/:notificationId/:channel/templates/:templateId': 'deleteTemplate',

  'GET /logs': 'getLogs',
  'GET /logs/tail': 'tailLogs',
  'GET /logs/retention': 'getLogRetention',
  'GET /logs/:trackingIds': 'getLogsByTrackingIds',
  'POST /logs/query': 'startLogsQuery',
  'GET /logs/query/:queryId': 'getLogsQueryResult',

  'GET /domains': 'listDomains',
  'POST /domains': 'addDomain',
  'DELETE /domains/:sender': 'deleteDomain',
  'GET /addresses': 'listAddresses',
  'POST /addresses': 'createAddress',
  'PATCH /addresses': 'updateAddress',
  'GET /numbers/list': 'listNumbers',
  'GET /numbers/available': 'searchAvailable',
  'GET /numbers/released': 'listReleased',
  'POST /numbers/order': 'orderNumber',
  'DELETE /numbers/:phoneNumber': 'releaseNumber',

  'GET /settings/push/apn': 'getPushApnSettings',
  'PUT /settings/push/apn': 'upsertPushApnSettings',
  'DELETE /settings/push/apn': 'deletePushApnSettings',
  'GET /settings/push/fcm': 'getPushFcmSettings',
  'PUT /settings/push/fcm': 'upsertPushFcmSettings',
  'DELETE /settings/push/fcm': 'deletePushFcmSettings',
  'GET /webhooks/events': 'getEventsWebhook',
  'PUT /webhooks/events': 'upsertEventsWebhook',
  'DELETE /webhooks/events': 'deleteEventsWebhook',
};

/**
 * The operationId of `METHOD url` (Fastify syntax): the SDK's name, or else the method and the
 * path's words, a parameter read as "by <name>": `GET /outbox/:id/raw` is `getOutboxByIdRaw`,
 * `POST /webhooks/:endpointId/recover` is `postWebhooksByEndpointIdRecover`. Two routes differ
 * in method or path, so they differ in name.
 */
export function operationIdOf(method: string, url: string): string {
  const path = url.length > 1 ? url.replace(/\/$/, '') : url;
  return SDK_OPERATION_IDS[`${method} ${path}`] ?? derivedOperationId(method, path);
}

function derivedOperationId(method: string, path: string): string {
  const words = path
    .split('/')
    .filter(Boolean)
    .flatMap((segment) => (segment.startsWith(':') ? ['by', ...wordsOf(segment.slice(1))] : wordsOf(segment)));
  return method.toLowerCase() + (words.length ? words.map(capitalized).join('') : 'Root');
}

/** `slack-oauth` → slack, oauth; `Messages.json` → Messages, json; camelCase words stay whole. */
const wordsOf = (segment: string) => segment.split(/[^A-Za-z0-9]+/).filter(Boolean);

/** `INAPP` → Inapp (a shouted word reads as a word), `subNotifications` → SubNotifications. */
const capitalized = (word: string) => {
  const base = word === word.toUpperCase() ? word.toLowerCase() : word;
  return base.charAt(0).toUpperCase() + base.slice(1);
};

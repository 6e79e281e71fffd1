import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { NotificationTypeId, StringEnum, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { type AuthService, requireEnv } from '../auth/auth.service.js';
import { type InappAuthenticator, inappUnauthorized } from '../inapp/inapp.auth.js';
import { SEND_CHANNELS } from '../sending/channels.js';
import { DELIVERY_OPTIONS } from '../types/delivery-options.js';
import type { PreferenceFilter, PreferencesService } from './preferences.service.js';

const Id = Type.String({ minLength: 1, maxLength: 256 });

const PreferenceItem = Type.Object(
  {
    notificationId: NotificationTypeId,
    subNotificationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    channel: Type.Optional(StringEnum(SEND_CHANNELS.map((c) => c.channel))),
    delivery: Type.Optional(StringEnum(DELIVERY_OPTIONS)),
  },
  { additionalProperties: false },
);
const PreferencesBody = Type.Array(PreferenceItem, { minItems: 1, maxItems: 200 });

const PreferencesResponse = Type.Object(
  {
    preferences: Type.Array(
      Type.Object({ notificationId: Type.String(), channel: Type.String(), delivery: Type.String(), subNotificationId: Type.Optional(Type.String()) }),
    ),
    notifications: Type.Array(
      Type.Object({
        notificationId: Type.String(),
        title: Type.String(),
        channels: Type.Array(Type.String()),
        options: Type.Object({}, { additionalProperties: true }),
      }),
    ),
    subNotifications: Type.Array(Type.Object({ notificationId: Type.String(), subNotificationId: Type.String(), title: Type.String() })),
  },
  { $id: 'GetPreferencesResponse' },
);
const Success = Type.Object({ success: Type.Boolean() });
const ResetResponse = Type.Object({ success: Type.Boolean(), deleted: Type.Integer() });
const ResetQuery = Type.Object({
  notificationId: Type.Optional(NotificationTypeId),
  subNotificationId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  envId: Type.Optional(Type.String()),
  /** With the environment's public key, in secure mode: the user's hash, as the in-app client sends it. */
  userIdHash: Type.Optional(Type.String()),
});

const ClientUserParams = Type.Object({ clientId: Id, userId: Id });
const UserParams = Type.Object({ userId: Id });

type ClientUser = { clientId: string; userId: string };

/**
 * User preferences (modules/preferences):
 * - the in-app client: `GET/POST /{clientId}/users/{userId}/preferences` with its Basic
 *   clientId:userId[:userHash] (secure mode checks the hash). It posts JSON as text/plain and
 *   never reads the answer, so every refusal is also logged (warn) with its reason;
 * - the older server SDK: `POST /{clientId}/user_preferences/{userId}` (Basic clientId:clientSecret)
 *   and `DELETE /{clientId}/users/{userId}/preferences` (server credentials or the user's Basic);
 * - API keys: `GET /users/{userId}/preferences`, `POST /user_preferences/{userId}`,
 *   `DELETE /users/{userId}/preferences`.
 */
export function preferenceRoutes(app: App, services: { preferences: PreferencesService; inappAuth: InappAuthenticator; auth: AuthService }): void {
  const { preferences: service, inappAuth, auth } = services;
  app.addSchema(PreferencesResponse);
  const tags = ['preferences'];
  const response = Type.Ref('GetPreferencesResponse');

  // Both authenticate before the body is looked at (onRequest), as every route does.
  /** The in-app client's user, from its Basic credentials. */
  async function endUser(req: FastifyRequest): Promise<void> {
    const { clientId, userId } = req.params as ClientUser;
    const scope = await inappAuth.authenticatePath(req.headers.authorization, clientId, userId);
    if (!scope) throw inappUnauthorized('Missing in-app credentials.');
    req.inappScope = scope;
  }

  /**
   * Server credentials acting in the path's environment, the environment's public key acting for
   * the user as the in-app client does (`?userIdHash=` in secure mode), or else the user's own
   * Basic credentials.
   */
  async function serverOrEndUser(req: FastifyRequest): Promise<void> {
    const { clientId, userId } = req.params as ClientUser;
    const { userIdHash } = req.query as { userIdHash?: string };
    try {
      const caller = await auth.authenticate(req.headers.authorization, clientId, { publicKey: true });
      req.inappScope = await inappAuth.actingFor(caller, userId, userIdHash || undefined);
    } catch (err) {
      // A Bearer token refused is refused: only Basic may be the user's own instead.
      if (!(err instanceof AppError) || err.code !== 'UNAUTHORIZED' || /^bearer\s/i.test(req.headers.authorization ?? '')) throw err;
      await endUser(req);
    }
  }

  // The in-app client does not look at the status: say in the log why it was refused.
  const logRefusal = (req: FastifyRequest, _reply: FastifyReply, err: Error, done: () => void) => {
    const { clientId, userId } = req.params as Partial<ClientUser>;
    req.log.warn({ clientId, userId, code: (err as Partial<AppError>).code ?? 'VALIDATION_FAILED', reason: err.message }, 'in-app client preferences request refused');
    done();
  };
  const inappConfig = { auth: 'inapp' as const };
  const endUserRoute = { config: inappConfig, onRequest: endUser, onError: logRefusal };

  app.get(
    '/:clientId/users/:userId/preferences',
    { ...endUserRoute, schema: { tags, summary: "The user's preferences and the types they apply to (in-app client)", params: ClientUserParams, response: withErrors({ 200: response }) } },
    (req) => service.get(req.inappScope, req.params.userId),
  );

  app.post(
    '/:clientId/users/:userId/preferences',
    {
      ...endUserRoute,
      schema: { tags, summary: 'Set delivery options of the user (in-app client)', params: ClientUserParams, body: PreferencesBody, response: withErrors({ 200: Success }) },
    },
    async (req) => {
      await service.set(req.inappScope, req.params.userId, req.body, 'user');
      return { success: true };
    },
  );

  app.delete(
    '/:clientId/users/:userId/preferences',
    {
      config: inappConfig,
      onRequest: serverOrEndUser,
      schema: {
        tags,
        summary: "Reset the user's preferences to the types' defaults (all, one type's, or one sub-notification's)",
        params: ClientUserParams,
        querystring: ResetQuery,
        response: withErrors({ 200: ResetResponse }),
      },
    },
    async (req) => ({ success: true, deleted: await service.reset(req.inappScope, req.params.userId, filterOf(req.query)) }),
  );

  const serverScope = (req: FastifyRequest): EnvScope => ({ accountId: req.auth.accountId, envId: requireEnv(req.auth) });

  app.post(
    '/:clientId/user_preferences/:userId',
    { schema: { tags, summary: 'Set delivery options of a user (older server SDK)', params: ClientUserParams, body: PreferencesBody, response: withErrors({ 200: Success }) } },
    async (req) => {
      await service.set(serverScope(req), req.params.userId, req.body, 'api');
      return { success: true };
    },
  );

  app.get(
    '/users/:userId/preferences',
    { schema: { tags, summary: "A user's preferences and the types they apply to", params: UserParams, response: withErrors({ 200: response }) } },
    (req) => service.get(serverScope(req), req.params.userId),
  );

  app.post(
    '/user_preferences/:userId',
    { schema: { tags, summary: 'Set delivery options of a user', params: UserParams, body: PreferencesBody, response: withErrors({ 200: Success }) } },
    async (req) => {
      await service.set(serverScope(req), req.params.userId, req.body, 'api');
      return { success: true };
    },
  );

  app.delete(
    '/users/:userId/preferences',
    { schema: { tags, summary: "Reset a user's preferences to the types' defaults", params: UserParams, querystring: ResetQuery, response: withErrors({ 200: ResetResponse }) } },
    async (req) => ({ success: true, deleted: await service.reset(serverScope(req), req.params.userId, filterOf(req.query)) }),
  );
}

function filterOf(query: { notificationId?: string; subNotificationId?: string }): PreferenceFilter {
  if (query.subNotificationId !== undefined && query.notificationId === undefined) {
    throw new AppError('VALIDATION_FAILED', 'subNotificationId needs notificationId: a sub-notification belongs to one type.', 'Add ?notificationId=<type id>.');
  }
  return { ...(query.notificationId !== undefined ? { notificationId: query.notificationId } : {}), ...(query.subNotificationId !== undefined ? { subNotificationId: query.subNotificationId } : {}) };
}

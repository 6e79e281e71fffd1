import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { ensureWebsocketSupport } from '../../realtime/websocket.js';
import { type AuthContext, type AuthService, requireEnv } from '../auth/auth.service.js';
import { type InappAuthenticator, inappUnauthorized, parseInappBasic } from './inapp.auth.js';
import type { InappScope } from './inapp.repository.js';
import {
  ClientPathParams,
  CountResponse,
  ListQuery,
  ListResponse,
  MarkSeenBody,
  type MarkSeenBodyType,
  OnBehalfQuery,
  PatchBody,
  type PatchBodyType,
  SHARED_SCHEMAS,
  SuccessResponse,
} from './inapp.schemas.js';
import type { InappService } from './inapp.service.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The in-app user a request acts for, set by the in-app routes' own authentication. */
    inappScope: InappScope;
  }
}

type Query = Record<string, unknown>;
const str = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);

/** A missing body is an empty object (app.ts already reads text/plain and untyped bodies as JSON). */
function jsonBody(req: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (req.body === undefined || req.body === null) req.body = {};
  done();
}

/**
 * In-app notifications of end users:
 * - `/user/inapp[...]` (the pingram SDK's UserApi): Basic base64(clientId:userId[:userHash]), or
 *   an API key / JWT acting for `?userId=` (a public key also with `?userIdHash=` in secure mode);
 * - `/{clientId}/users/{userId}/notifications/INAPP_WEB[...]` (the published in-app client), same Basic;
 * - the websocket at `/` (and `/ws`) with `?envId=<clientId>&userId=...[&userIdHash=...]`.
 */
export async function inappRoutes(
  app: App,
  deps: Pick<Deps, 'inappRealtime'>,
  services: { inapp: InappService; inappAuth: InappAuthenticator; auth: AuthService },
): Promise<void> {
  const { inapp: service, inappAuth: authenticator, auth: accountAuth } = services;
  const realtime = deps.inappRealtime;
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  app.decorateRequest('inappScope', null as unknown as InappScope);
  await ensureWebsocketSupport(app);
  await realtime.listen();
  app.addHook('onClose', () => realtime.close());

  const config = { auth: 'inapp' as const };
  const tags = ['in-app'];

  async function userAuth(req: FastifyRequest): Promise<void> {
    const header = req.headers.authorization;
    const query = req.query as Query;
    if (header && /^bearer\s/i.test(header)) {
      const auth = await accountAuth.authenticate(header, str(query.envId), { publicKey: true });
      requireEnv(auth);
      const userId = str(query.userId);
      if (!userId) throw invalid('With an API key or JWT, name the user with the userId query parameter.', 'Add ?userId=<user id>, or authenticate as the user with Basic clientId:userId[:userHash].');
      req.inappScope = await authenticator.actingFor(auth, userId, str(query.userIdHash));
      return;
    }
    const actingFor = str(query.userId);
    const server = actingFor && header ? await clientCredentials(header, str(query.envId)) : undefined;
    if (server && actingFor) {
      req.inappScope = await authenticator.actingFor(server, actingFor, str(query.userIdHash));
      return;
    }
    const credentials = parseInappBasic(header);
    if (!credentials) throw inappUnauthorized('Missing in-app credentials.');
    req.inappScope = await authenticator.authenticate(credentials);
  }

  /**
   * Basic clientId:clientSecret with `?userId=`: the environment's client credentials acting for
   * that user, as the other server credentials do (README: Permission matrix). The same header
   * shape is an end user's clientId:userId, so credentials that are not the client's are read as
   * the end user's (undefined here), as before.
   */
  async function clientCredentials(header: string, envId: string | undefined): Promise<AuthContext | undefined> {
    if (!/^basic\s/i.test(header)) return undefined;
    try {
      return await accountAuth.authenticate(header, envId);
    } catch (err) {
      if (err instanceof AppError && err.code === 'UNAUTHORIZED') return undefined;
      throw err;
    }
  }

  async function pathAuth(req: FastifyRequest): Promise<void> {
    const { clientId, userId } = req.params as { clientId: string; userId: string };
    const scope = await authenticator.authenticatePath(req.headers.authorization, clientId, userId);
    if (!scope) throw inappUnauthorized('Missing in-app credentials.');
    req.inappScope = scope;
  }

  const markSeenFilter = (body: MarkSeenBodyType) => {
    const ids = [...(body.trackingIds ?? []), ...(body.trackingId !== undefined ? [body.trackingId] : [])];
    return {
      ...(body.trackingIds !== undefined || body.trackingId !== undefined ? { trackingIds: ids } : {}),
      ...(body.notificationId !== undefined ? { notificationId: body.notificationId } : {}),
    };
  };

  const variants = [
    { base: '/user/inapp', onRequest: userAuth, extraQuery: OnBehalfQuery.properties, params: undefined },
    { base: '/:clientId/users/:userId/notifications/INAPP_WEB', onRequest: pathAuth, extraQuery: {}, params: ClientPathParams },
  ];
  for (const { base, onRequest, extraQuery, params } of variants) {
    const common = { config, onRequest };
    const schemaBase = { tags, ...(params ? { params } : {}) };

    app.get(
      base,
      {
        ...common,
        schema: {
          ...schemaBase,
          summary: 'In-app notifications of the user, newest first',
          querystring: Type.Object({ ...ListQuery.properties, ...extraQuery }),
          response: withErrors({ 200: ListResponse }),
        },
      },
      async (req) => {
        const query = req.query as { before?: string; count?: number };
        return { notifications: await service.list(req.inappScope, { before: query.before, count: query.count }) };
      },
    );

    app.get(
      `${base}/unread`,
      {
        ...common,
        schema: { ...schemaBase, summary: 'Number of unseen in-app notifications', querystring: Type.Object(extraQuery), response: withErrors({ 200: CountResponse }) },
      },
      async (req) => ({ count: await service.unreadCount(req.inappScope) }),
    );

    app.patch(
      base,
      {
        ...common,
        preValidation: jsonBody,
        schema: {
          ...schemaBase,
          summary: 'Set or clear opened/clicked/archived/actioned statuses, append replies',
          querystring: Type.Object(extraQuery),
          body: PatchBody,
          response: withErrors({ 200: SuccessResponse }),
        },
      },
      async (req) => {
        await service.update(req.inappScope, req.body as PatchBodyType);
        return { success: true };
      },
    );

    app.patch(
      `${base}/unread`,
      {
        ...common,
        preValidation: jsonBody,
        schema: {
          ...schemaBase,
          summary: 'Mark notifications seen: all, or by trackingId(s) or notificationId',
          querystring: Type.Object(extraQuery),
          body: MarkSeenBody,
          response: withErrors({ 200: SuccessResponse }),
        },
      },
      async (req) => {
        await service.markSeen(req.inappScope, markSeenFilter(req.body));
        return { success: true };
      },
    );
  }

  /** Per upgrade request: the environment's credentials epoch read before authenticating it. */
  const epochs = new WeakMap<FastifyRequest, number>();
  // The published client connects to wss://<websocketHost>?userId=..&envId=<clientId>[&userIdHash=..].
  for (const url of ['/', '/ws']) {
    app.route({
      method: 'GET',
      url,
      config,
      schema: { hide: true },
      onRequest: async (req) => {
        if (!req.ws) return;
        const query = req.query as Query;
        const clientId = str(query.envId) ?? str(query.clientId);
        if (clientId) epochs.set(req, realtime.credentialsEpoch(clientId));
        req.inappScope = await authenticator.authenticate({
          clientId,
          userId: str(query.userId),
          hash: str(query.userIdHash) ?? str(query.hashedUserId),
        });
      },
      handler: () => {
        throw new AppError('ROUTE_NOT_FOUND', `GET ${url} is the in-app websocket.`, 'Connect with a WebSocket client: ?envId=<clientId>&userId=<user id>[&userIdHash=<hash>].');
      },
      wsHandler: (socket, req) => {
        realtime.attach(req.inappScope, socket, epochs.get(req));
        // Clients only listen; anything they send is ignored.
        socket.on('message', () => undefined);
      },
    });
  }
}

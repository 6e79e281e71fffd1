import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { AuthService } from '../auth/auth.service.js';
import type { InappAuthenticator } from '../inapp/inapp.auth.js';
import { pathUserAuth } from '../inapp/path-user.js';
import type { DirectoryCaller, SlackDirectoryService } from './slack-directory.service.js';

const SlackObject = Type.Object({ id: Type.Optional(Type.String()) }, { additionalProperties: true });

const WorkspaceSchema = Type.Object({
  channels: Type.Array(SlackObject, { description: 'conversations.list: public and private channels the token sees, archived left out' }),
  users: Type.Array(SlackObject, { description: 'users.list' }),
  me: Type.Optional(SlackObject),
  hasMoreChannels: Type.Boolean({ description: 'more than the 1000 listed' }),
  hasMoreUsers: Type.Boolean({ description: 'more than the 1000 listed' }),
});

/** The query of the UserApi routes: the environment for a JWT, the user's hash for a public key in secure mode. */
export const ServerForUserQuery = Type.Object({
  envId: Type.Optional(Type.String({ description: 'environment, when authenticating with a JWT' })),
  userIdHash: Type.Optional(Type.String({ description: "with a public key in secure mode: the user's hash, base64(HMAC-SHA256(clientSecret, userId))" })),
});

const UserParam = { userId: Type.String({ minLength: 1, maxLength: 256 }) };

/**
 * serverForPathUser (modules/inapp/path-user.ts) that also keeps the caller in `req.auth`, so the
 * listing knows which kind of credential acted: the environment's public key acts for the user
 * as an end user does, secret credentials as the server.
 */
function serverOrPublicKeyForPathUser(auth: AuthService, inappAuth: InappAuthenticator) {
  return async (req: FastifyRequest): Promise<void> => {
    const { userId } = req.params as { userId: string };
    const query = req.query as { envId?: unknown; userIdHash?: unknown };
    const caller = await auth.authenticate(req.headers.authorization, typeof query.envId === 'string' ? query.envId : undefined, { publicKey: true });
    req.inappScope = await inappAuth.actingFor(caller, userId, typeof query.userIdHash === 'string' && query.userIdHash !== '' ? query.userIdHash : undefined);
    req.auth = caller;
  };
}

/**
 * The channels and members of a user's Slack workspace, to pick the destination stored as the
 * user's slackChannel:
 * - `GET /{clientId}/users/{userId}/slack/channels` (the in-app client's slack.getChannels), with
 *   the user's Basic credentials: an end user, listed with the user's own Slack token only;
 * - `GET /users/{userId}/slack-channels` (the pingram SDK's user.getAvailableSlackChannels), with
 *   server credentials (which may list with the environment's bot token) or the environment's
 *   public key acting for the user (an end user again).
 */
export function slackDirectoryRoutes(app: App, services: { slackDirectory: SlackDirectoryService; inappAuth: InappAuthenticator; auth: AuthService }): void {
  const response = withErrors({ 200: WorkspaceSchema });
  app.get(
    '/:clientId/users/:userId/slack/channels',
    {
      config: { auth: 'inapp' },
      onRequest: pathUserAuth(services.inappAuth),
      schema: {
        tags: ['users'],
        summary: "Channels and members of the signed-in user's Slack workspace (in-app client slack.getChannels)",
        params: Type.Object({ clientId: Type.String({ minLength: 1, maxLength: 256 }), ...UserParam }),
        response,
      },
    },
    (req) => services.slackDirectory.workspaceOf(req.inappScope, req.inappScope.userId, 'end-user'),
  );

  app.get(
    '/users/:userId/slack-channels',
    {
      config: { auth: 'inapp' },
      onRequest: serverOrPublicKeyForPathUser(services.auth, services.inappAuth),
      schema: {
        tags: ['users'],
        summary: "Channels and members of the user's Slack workspace (pingram SDK user.getAvailableSlackChannels)",
        params: Type.Object(UserParam),
        querystring: ServerForUserQuery,
        response,
      },
    },
    (req) => {
      const caller: DirectoryCaller = req.auth.publicKey ? 'end-user' : 'server';
      return services.slackDirectory.workspaceOf(req.inappScope, req.inappScope.userId, caller);
    },
  );
}

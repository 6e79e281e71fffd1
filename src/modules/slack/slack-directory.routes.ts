import { Type } from '@sinclair/typebox';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { AuthService } from '../auth/auth.service.js';
import type { InappAuthenticator } from '../inapp/inapp.auth.js';
import { pathUserAuth, serverForPathUser } from '../inapp/path-user.js';
import type { SlackDirectoryService } from './slack-directory.service.js';

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
 * The channels and members of a user's Slack workspace, to pick the destination stored as the
 * user's slackChannel:
 * - `GET /{clientId}/users/{userId}/slack/channels` (the in-app client's slack.getChannels), with
 *   the user's Basic credentials;
 * - `GET /users/{userId}/slack-channels` (the pingram SDK's user.getAvailableSlackChannels), with
 *   server credentials or the environment's public key acting for the user.
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
    (req) => services.slackDirectory.workspaceOf(req.inappScope, req.inappScope.userId),
  );

  app.get(
    '/users/:userId/slack-channels',
    {
      config: { auth: 'inapp' },
      onRequest: serverForPathUser(services.auth, services.inappAuth),
      schema: {
        tags: ['users'],
        summary: "Channels and members of the user's Slack workspace (pingram SDK user.getAvailableSlackChannels)",
        params: Type.Object(UserParam),
        querystring: ServerForUserQuery,
        response,
      },
    },
    (req) => services.slackDirectory.workspaceOf(req.inappScope, req.inappScope.userId),
  );
}

import { Type } from '@sinclair/typebox';
import { invalid } from '../../errors.js';
import { withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import type { InappAuthenticator } from '../inapp/inapp.auth.js';
import { pathUserAuth } from '../inapp/path-user.js';
import { IdentifyBody } from './users.schemas.js';
import type { UsersService } from './users.service.js';

const ClientUserParams = Type.Object({ clientId: Type.String({ minLength: 1, maxLength: 256 }), userId: Type.String({ minLength: 1, maxLength: 256 }) });

/**
 * A user's own record, with the user's credentials (Basic clientId:userId[:userHash]; the hash is
 * checked in secure mode, which is what keeps one browser from rewriting another user's
 * contacts, so production environments turn it on):
 * - `POST /{clientId}/users/{userId}`: identify. The in-app client's `identify` and
 *   `slack.setChannel` (JSON as text/plain, a trailing slash), and the older server SDK's
 *   `identifyUser` (which always sends the hash). Same rules as POST /users/{userId}.
 * - `GET /{clientId}/users/{userId}`: the in-app client's `user.get`; credentials in the
 *   slackToken are masked, as in every read.
 */
export function clientUserRoutes(app: App, services: { users: UsersService; inappAuth: InappAuthenticator }): void {
  const { users: service } = services;
  const tags = ['users'];
  const route = { config: { auth: 'inapp' as const }, onRequest: pathUserAuth(services.inappAuth) };

  app.post(
    '/:clientId/users/:userId',
    {
      ...route,
      schema: {
        tags,
        summary: 'Create or update the signed-in user (in-app client identify, older server SDK identifyUser)',
        params: ClientUserParams,
        body: IdentifyBody,
        response: withErrors({ 200: Type.Ref('User') }),
      },
    },
    (req) => {
      const { accountId, envId, userId } = req.inappScope;
      if (req.body.id !== undefined && req.body.id !== userId) {
        throw invalid(`Body id "${req.body.id}" does not match the userId "${userId}" in the path.`, 'Send the same id in the path and the body, or omit id from the body.');
      }
      return service.identify(accountId, envId, { ...req.body, id: userId });
    },
  );

  app.get(
    '/:clientId/users/:userId',
    { ...route, schema: { tags, summary: 'The signed-in user (in-app client user.get)', params: ClientUserParams, response: withErrors({ 200: Type.Ref('User') }) } },
    (req) => service.require(req.inappScope.accountId, req.inappScope.envId, req.inappScope.userId),
  );
}

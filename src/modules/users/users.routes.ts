import { Type } from '@sinclair/typebox';
import { invalid } from '../../errors.js';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { requireEnv } from '../auth/auth.service.js';
import { EnvQuery, IdentifyBody, ListQuery, SuppressionParams, UserIdParams, UserSchema } from './users.schemas.js';
import type { UsersService } from './users.service.js';
import { validateUserId } from './users.validation.js';

export function userRoutes(app: App, service: UsersService): void {
  app.addSchema(UserSchema);
  const user = Type.Ref('User');
  const tags = ['users'];

  app.post(
    '/users/:userId',
    {
      schema: {
        tags,
        summary: 'Create or update (identify) a user; lastSeenTime is updated automatically',
        params: UserIdParams,
        querystring: EnvQuery,
        body: IdentifyBody,
        response: withErrors({ 200: user }),
      },
    },
    (req) => {
      const envId = requireEnv(req.auth);
      const userId = validateUserId(req.params.userId);
      const body = req.body;
      if (body.id !== undefined && body.id !== userId) {
        throw invalid(
          `Body id "${body.id}" does not match the userId "${userId}" in the path.`,
          'Send the same id in the path and the body, or omit id from the body.',
        );
      }
      return service.identify(req.auth.accountId, envId, { ...body, id: userId });
    },
  );

  app.get(
    '/users/:userId',
    { schema: { tags, summary: 'Get a user', params: UserIdParams, querystring: EnvQuery, response: withErrors({ 200: user }) } },
    (req) => service.require(req.auth.accountId, requireEnv(req.auth), req.params.userId),
  );

  app.get(
    '/users',
    {
      schema: {
        tags,
        summary: 'List users, newest first',
        querystring: ListQuery,
        response: withErrors({
          200: Type.Object({
            users: Type.Array(user),
            hasMore: Type.Boolean(),
            lastEvaluatedKey: Type.Optional(Type.String({ description: 'nextToken of the next page; present when hasMore' })),
          }),
        }),
      },
    },
    (req) => service.list(req.auth.accountId, requireEnv(req.auth), { limit: req.query.limit, nextToken: req.query.nextToken }),
  );

  app.delete(
    '/users/:userId',
    { schema: { tags, summary: 'Delete a user', params: UserIdParams, querystring: EnvQuery, response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.delete(req.auth.accountId, requireEnv(req.auth), req.params.userId);
      return { message: 'User deleted' };
    },
  );

  app.delete(
    '/user_suppression/:userId/channel/:channel',
    {
      schema: {
        tags,
        summary: 'Remove the suppression of a user for one channel',
        params: SuppressionParams,
        querystring: EnvQuery,
        response: withErrors({ 200: Type.Object({ user }) }),
      },
    },
    async (req) => ({ user: await service.clearSuppression(req.auth.accountId, requireEnv(req.auth), req.params.userId, req.params.channel) }),
  );
}

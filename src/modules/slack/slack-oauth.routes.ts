import { Type } from '@sinclair/typebox';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, type AuthService, requireEnv } from '../auth/auth.service.js';
import type { InappAuthenticator } from '../inapp/inapp.auth.js';
import { serverForPathUser } from '../inapp/path-user.js';
import { ServerForUserQuery } from './slack-directory.routes.js';
import { SLACK_OAUTH_CALLBACK_PATH, type SlackOauthService } from './slack-oauth.service.js';

const SlackAppSchema = Type.Object({
  clientId: Type.String(),
  clientSecret: Type.String({ description: 'masked' }),
  redirectUri: Type.String({ description: "Clarion's callback: add it to the app's Redirect URLs" }),
  scopes: Type.Array(Type.String(), { description: 'the bot scopes installs ask for' }),
  updatedAt: Type.String(),
});

const UserAnswer = Type.Object({ user: Type.Object({ id: Type.String() }, { additionalProperties: true, description: 'the user, slackToken masked' }) });
const UserParams = Type.Object({ userId: Type.String({ minLength: 1, maxLength: 256 }) });
const HttpUrl = Type.String({ minLength: 1, maxLength: 2048, pattern: '^https?://' });

/** The environment's Slack app (its OAuth client id and secret), with the account's credentials. */
export function slackAppRoutes(app: App, service: SlackOauthService): void {
  const tags = ['settings'];
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  app.get(
    '/settings/slack/app',
    { schema: { tags, summary: "The environment's Slack app for user installs (client secret masked)", response: withErrors({ 200: SlackAppSchema }) } },
    (req) => service.getApp(scope(req.auth)),
  );

  app.put(
    '/settings/slack/app',
    {
      schema: {
        tags,
        summary: "Set the environment's Slack app (Basic Information: Client ID, Client Secret; the secret is encrypted at rest)",
        body: Type.Object(
          {
            clientId: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' }),
            clientSecret: Type.String({ minLength: 8, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' }),
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: SlackAppSchema }),
      },
    },
    (req) => service.putApp(scope(req.auth), req.body),
  );

  app.delete(
    '/settings/slack/app',
    { schema: { tags, summary: "Remove the environment's Slack app", response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.deleteApp(scope(req.auth));
      return { message: 'Slack app removed' };
    },
  );

  // Slack sends the user's browser here after the install; the signed state is the authority.
  app.get(
    SLACK_OAUTH_CALLBACK_PATH,
    {
      schema: {
        tags: ['users'],
        summary: "Slack's OAuth v2 redirect: exchanges the code and stores the user's slackToken",
        querystring: Type.Object({
          code: Type.Optional(Type.String({ maxLength: 512 })),
          state: Type.Optional(Type.String({ maxLength: 2048 })),
          error: Type.Optional(Type.String({ maxLength: 256 })),
        }),
        response: withErrors({ 200: Type.String(), 502: Type.Ref('ErrorBody') }),
      },
    },
    async (req, reply) => {
      const user = await service.callback(req.query);
      return reply.type('text/plain; charset=utf-8').send(`Slack is connected for ${user.id}. You can close this window.`);
    },
  );
}

/**
 * A user's Slack install with the pingram SDK's UserApi, server credentials or the environment's
 * public key acting for the path's user (app.ts registers them among the browser routes):
 * - `GET /users/{userId}/slack-oauth`: Slack's authorize URL, back to Clarion's callback;
 * - `POST /users/{userId}/slack-oauth` `{code, redirect_uri}` (user.generateSlackOauthPath): the
 *   caller's own redirect page got the code; Clarion exchanges it.
 */
export function slackUserOauthRoutes(app: App, services: { slackOauth: SlackOauthService; auth: AuthService; inappAuth: InappAuthenticator }): void {
  const onRequest = serverForPathUser(services.auth, services.inappAuth);
  const tags = ['users'];

  app.get(
    '/users/:userId/slack-oauth',
    {
      config: { auth: 'inapp' },
      onRequest,
      schema: {
        tags,
        summary: "Slack's OAuth v2 authorize URL for installing the environment's Slack app for the user",
        params: UserParams,
        querystring: ServerForUserQuery,
        response: withErrors({ 200: Type.Object({ url: Type.String(), redirectUri: Type.String(), expiresAt: Type.String() }) }),
      },
    },
    (req) => services.slackOauth.authorizeUrl(req.inappScope),
  );

  app.post(
    '/users/:userId/slack-oauth',
    {
      config: { auth: 'inapp' },
      onRequest,
      schema: {
        tags,
        summary: "Complete a Slack install: exchange the code (oauth.v2.access) and store the user's slackToken (pingram SDK user.generateSlackOauthPath)",
        params: UserParams,
        querystring: ServerForUserQuery,
        body: Type.Object({ code: Type.String({ minLength: 1, maxLength: 512 }), redirect_uri: HttpUrl }, { additionalProperties: false }),
        response: withErrors({ 200: UserAnswer, 502: Type.Ref('ErrorBody') }),
      },
    },
    async (req) => ({ user: await services.slackOauth.complete(req.inappScope, req.body.code, req.body.redirect_uri) }),
  );
}

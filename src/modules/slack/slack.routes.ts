import { Type } from '@sinclair/typebox';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import type { SlackSettingsService } from './slack.service.js';

const SlackSettingSchema = Type.Object({
  botToken: Type.Union([Type.String(), Type.Null()], { description: "this environment's bot token, masked (xoxb-****1a2b)" }),
  source: Type.Union([Type.Literal('environment'), Type.Literal('none')]),
  team: Type.Optional(Type.Object({ id: Type.String(), name: Type.Optional(Type.String()) })),
  updatedAt: Type.Optional(Type.String()),
});

/** The environment's Slack bot token, used for users whose slackToken carries no token. */
export function slackRoutes(app: App, service: SlackSettingsService): void {
  const tags = ['settings'];
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  app.get(
    '/settings/slack',
    { schema: { tags, summary: "The environment's Slack bot token (masked)", response: withErrors({ 200: SlackSettingSchema }) } },
    (req) => service.get(scope(req.auth)),
  );

  app.put(
    '/settings/slack',
    {
      schema: {
        tags,
        summary: "Set the environment's Slack bot token (encrypted at rest); Slack messages to users without their own slackToken use it",
        body: Type.Object(
          {
            botToken: Type.String({ minLength: 8, maxLength: 255, description: 'Bot User OAuth Token of your Slack app (xoxb-...)' }),
            verify: Type.Optional(Type.Boolean({ description: 'check the token with Slack (auth.test) before saving' })),
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: SlackSettingSchema, 502: Type.Ref('ErrorBody') }),
      },
    },
    (req) => service.put(scope(req.auth), req.body.botToken, req.body.verify ?? false),
  );

  app.delete(
    '/settings/slack',
    { schema: { tags, summary: "Remove the environment's Slack bot token", response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.delete(scope(req.auth));
      return { message: 'Slack setting removed' };
    },
  );
}

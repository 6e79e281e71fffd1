import { SlackClients } from '../../../channels/slack/client.js';
import { SlackSender } from '../../../channels/slack/sender.js';
import { DeliveryError } from '../../../channels/types.js';
import type { Deps } from '../../../deps.js';
import type { SlackSettingsService } from '../../slack/slack.service.js';
import type { UsersService } from '../../users/users.service.js';
import { userSlackToken } from '../../users/slack-token.js';
import { type ManagedExecutor, str } from './types.js';

export function slackExecutor(deps: Deps, services: { users: UsersService; slackSettings: SlackSettingsService }): ManagedExecutor {
  const { users, slackSettings: settings } = services;
  const sender = new SlackSender(new SlackClients({ apiUrl: deps.config.slackApiUrl, logger: deps.logger }), deps.clock);
  return {
    fromInline: (body) => {
      if (!body.slack) return null;
      const { text, blocks, username, icon } = body.slack;
      return { text, ...(blocks ? { blocks } : {}), ...(username !== undefined ? { username } : {}), ...(icon !== undefined ? { icon } : {}) };
    },
    preview: (c) => str(c.text) ?? '',
    async deliver({ message, content, body }) {
      // The unmasked token: users.get() shows it masked, as every read does.
      const user = await users.slackDestination(message.account_id, message.env_id, message.user_id);
      if (!user) throw new DeliveryError('USER_DELETED', 'the recipient was deleted before delivery', { retryable: false });
      if (!user.channel) throw new DeliveryError('NO_SLACK_DESTINATION', 'the user has no slackChannel', { retryable: false });
      const token = userSlackToken(user.token) ?? (await settings.botToken({ accountId: message.account_id, envId: message.env_id }));
      if (!token) {
        throw new DeliveryError('NO_SLACK_TOKEN', 'neither the user (slackToken) nor the environment (PUT /settings/slack) has a Slack token', { retryable: false });
      }
      const { text: _t, blocks: _b, username: _u, icon: _i, ...options } = body.slack ?? ({} as NonNullable<typeof body.slack>);
      const posted = await sender.post({
        token,
        destination: user.channel,
        content,
        options,
      });
      return {
        result: { providerMessageId: `${posted.channel}:${posted.ts}`, response: `ok channel=${posted.channel} ts=${posted.ts}` },
        // Slack answers ok once the message is in the conversation: that is delivery.
        delivered: true,
        extra: { slack_delivered_internal: JSON.stringify({ channel: posted.channel, ts: posted.ts }) },
      };
    },
  };
}

import { SlackClients, outcomeUnknown } from '../../../channels/slack/client.js';
import { type SlackPostResult, SlackSender } from '../../../channels/slack/sender.js';
import { DeliveryError } from '../../../channels/types.js';
import type { Deps } from '../../../deps.js';
import type { SlackSettingsService } from '../../slack/slack.service.js';
import type { UsersService } from '../../users/users.service.js';
import { userSlackToken } from '../../users/slack-token.js';
import { UNRECORDED_RUN } from '../unrecorded-runs.js';
import { type DeliverInput, type ManagedExecutor, str } from './types.js';

export function slackExecutor(deps: Deps, services: { users: UsersService; slackSettings: SlackSettingsService }): ManagedExecutor {
  const { users, slackSettings: settings } = services;
  const sender = new SlackSender(new SlackClients({ apiUrl: deps.config.slackApiUrl, logger: deps.logger, timeoutMs: deps.config.slackTimeoutMs }), deps.clock);
  /** When the earliest attempt of this delivery that may have posted began (its retry looks before posting). */
  const unknownOutcomeSince = async ({ earlierAttempts }: DeliverInput): Promise<Date | undefined> => {
    // Not delivery.attempts: a first attempt whose earlier run died has one too (DeliverInput.earlierAttempts).
    if (!earlierAttempts) return undefined;
    const earliest = (await earlierAttempts()).find((a) => a.outcome === 'retry' && (a.provider_code === UNRECORDED_RUN || outcomeUnknown(a.provider_code)));
    return earliest ? new Date(earliest.started_at) : undefined;
  };
  return {
    fromInline: (body) => {
      if (!body.slack) return null;
      const { text, blocks, username, icon } = body.slack;
      return { text, ...(blocks ? { blocks } : {}), ...(username !== undefined ? { username } : {}), ...(icon !== undefined ? { icon } : {}) };
    },
    preview: (c) => str(c.text) ?? '',
    async deliver(input) {
      const { delivery, message, content, body } = input;
      // The unmasked token: users.get() shows it masked, as every read does.
      const user = await users.slackDestination(message.account_id, message.env_id, message.user_id);
      if (!user) throw new DeliveryError('USER_DELETED', 'the recipient was deleted before delivery', { retryable: false });
      if (!user.channel) throw new DeliveryError('NO_SLACK_DESTINATION', 'the user has no slackChannel', { retryable: false });
      const token = userSlackToken(user.token) ?? (await settings.botToken({ accountId: message.account_id, envId: message.env_id }));
      if (!token) {
        throw new DeliveryError('NO_SLACK_TOKEN', 'neither the user (slackToken) nor the environment (PUT /settings/slack) has a Slack token', { retryable: false });
      }
      const { text: _t, blocks: _b, username: _u, icon: _i, ...options } = body.slack ?? ({} as NonNullable<typeof body.slack>);
      const since = await unknownOutcomeSince(input);
      const posted = await sender.post({
        token,
        destination: user.channel,
        content,
        options,
        mark: { trackingId: message.tracking_id, deliveryId: delivery.id },
        ...(since ? { unknownOutcomeSince: since } : {}),
      });
      if (posted.recheck && !posted.recheck.found && posted.recheck.failed) {
        deps.logger.warn(
          { trackingId: message.tracking_id, deliveryId: delivery.id, code: posted.recheck.failed.code, reason: posted.recheck.failed.message },
          'Slack: could not look for the message of an attempt whose outcome is unknown (channels:history, groups:history, im:history and membership let it); posted again, it may show twice',
        );
      }
      return {
        result: { providerMessageId: `${posted.channel}:${posted.ts}`, response: `ok channel=${posted.channel} ts=${posted.ts}${recheckNote(posted.recheck)}` },
        // Slack answers ok once the message is in the conversation: that is delivery.
        delivered: true,
        extra: { slack_delivered_internal: JSON.stringify({ channel: posted.channel, ts: posted.ts }) },
      };
    },
  };
}

/** The attempt's log line says whether an earlier attempt's message was found instead of posting again. */
function recheckNote(recheck: SlackPostResult['recheck']): string {
  if (!recheck) return '';
  if (recheck.found) return ' (posted by an earlier attempt; found in the conversation, not posted again)';
  return recheck.failed ? ` (an earlier attempt's outcome unknown; the conversation could not be read: ${recheck.failed.code}; posted again)` : " (an earlier attempt's outcome unknown; not in the conversation; posted)";
}

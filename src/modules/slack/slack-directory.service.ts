import { SlackClients, toDeliveryError } from '../../channels/slack/client.js';
import { type SlackWorkspaceListing, listWorkspace } from '../../channels/slack/directory.js';
import type { Deps } from '../../deps.js';
import { AppError, notFound } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { userSlackToken } from '../users/slack-token.js';
import type { UsersService } from '../users/users.service.js';
import type { SlackSettingsService } from './slack.service.js';

/**
 * Who asks for a listing. `end-user`: the user's own credentials (in-app Basic
 * clientId:userId[:userHash], or the environment's public key acting for the user); `server`:
 * secret credentials (API key, Basic clientId:clientSecret, JWT) acting for the user.
 */
export type DirectoryCaller = 'end-user' | 'server';

/**
 * The Slack workspace a user picks a destination from (the in-app client's slack.getChannels):
 * listed with the token the user's Slack messages would be posted with (the user's slackToken,
 * else the environment's bot token). The bot token is the company's, and sees every channel the
 * bot is in and every member: it lists only for server credentials, never for an end user, who
 * must have connected Slack (their own OAuth install) first.
 */
export class SlackDirectoryService {
  private readonly clients: SlackClients;

  constructor(
    deps: Pick<Deps, 'config' | 'logger'>,
    private readonly users: Pick<UsersService, 'slackDestination'>,
    private readonly settings: Pick<SlackSettingsService, 'botToken'>,
  ) {
    this.clients = new SlackClients({ apiUrl: deps.config.slackApiUrl, logger: deps.logger, timeoutMs: 10_000 });
  }

  async workspaceOf(scope: EnvScope, userId: string, caller: DirectoryCaller): Promise<SlackWorkspaceListing> {
    const user = await this.users.slackDestination(scope.accountId, scope.envId, userId);
    if (!user) throw notFound('User', userId, 'Identify the user first (the in-app client identify, or POST /users/{userId}).');
    const own = userSlackToken(user.token);
    if (!own && caller === 'end-user') {
      // Said the same whether or not the environment has a bot token: an end user learns nothing of it.
      throw new AppError(
        'NOT_FOUND',
        `User "${userId}" has not connected Slack: the workspace is listed with the user's own Slack token only.`,
        "Have the user install your Slack app first (GET /users/{userId}/slack-oauth, or your own page with POST /users/{userId}/slack-oauth); the environment's bot token lists the workspace only for server credentials.",
      );
    }
    const token = own ?? (await this.settings.botToken(scope));
    if (!token) {
      throw new AppError(
        'NOT_FOUND',
        'Neither this user (slackToken) nor the environment (PUT /settings/slack) has a Slack token to list the workspace with.',
        "Identify the user with the slackToken of your Slack app's OAuth v2 install, or set the environment's bot token with PUT /settings/slack.",
      );
    }
    const installer = (user.token?.authed_user as { id?: unknown } | undefined)?.id;
    try {
      return await listWorkspace(this.clients.for(token), typeof installer === 'string' ? installer : undefined);
    } catch (err) {
      const failure = toDeliveryError(err, 'listing the workspace');
      throw new AppError(
        'PROVIDER_ERROR',
        `Slack did not list the workspace: ${failure.message}`,
        failure.retryable ? 'Try again.' : 'The token needs the scopes channels:read, groups:read and users:read of a Slack app installed in the workspace.',
      );
    }
  }
}

import type { OauthV2AccessResponse } from '@slack/web-api';
import type { SlackClients } from './client.js';

/** A Slack app's OAuth credentials (Basic Information of the app's settings). */
export interface SlackAppCredentials {
  clientId: string;
  clientSecret: string;
}

/**
 * The bot scopes Clarion asks an install for: posting (chat:write), as the send's `slack.username`
 * and icon (chat:write.customize: without it Slack ignores both), to public channels the bot has
 * not joined (chat:write.public: without it a `#channel` the app was never invited to fails
 * not_in_channel), direct messages (im:write, for a user id as slackChannel), and listing the
 * workspace for the channel picker (channels:read, groups:read, users:read).
 */
export const SLACK_BOT_SCOPES = ['chat:write', 'chat:write.customize', 'chat:write.public', 'im:write', 'channels:read', 'groups:read', 'users:read'] as const;

/**
 * Slack's OAuth v2 authorize URL (https://slack.com/oauth/v2/authorize), on the host of the
 * configured Web API base (https://slack.com/api/ -> https://slack.com/oauth/v2/authorize), so a
 * local Slack peer serves both.
 */
export function slackAuthorizeUrl(apiUrl: string, app: { clientId: string }, redirectUri: string, state: string): string {
  const url = new URL('../oauth/v2/authorize', apiUrl);
  url.search = new URLSearchParams({ client_id: app.clientId, scope: SLACK_BOT_SCOPES.join(','), redirect_uri: redirectUri, state }).toString();
  return url.href;
}

/**
 * Exchanges the code of an install for its tokens (oauth.v2.access, authenticated with the
 * app's client id and secret). `redirectUri` must be the one the authorize step used. Errors are
 * the WebClient's (map them with toDeliveryError).
 */
export async function exchangeSlackCode(clients: SlackClients, app: SlackAppCredentials, code: string, redirectUri: string): Promise<OauthV2AccessResponse> {
  return clients.withoutToken().oauth.v2.access({ client_id: app.clientId, client_secret: app.clientSecret, code, redirect_uri: redirectUri });
}

import { SlackClients, toDeliveryError } from '../../channels/slack/client.js';
import { SLACK_BOT_SCOPES, type SlackAppCredentials, exchangeSlackCode, slackAuthorizeUrl } from '../../channels/slack/oauth.js';
import { publicBase } from '../../channels/telephony/endpoint.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { User, UsersService } from '../users/users.service.js';
import { STATE_TTL_SECONDS, signSlackOauthState, verifySlackOauthState } from './oauth-state.js';
import { SlackAppsRepository } from './slack.repository.js';

/** Clarion's own OAuth callback: register it as a Redirect URL of the Slack app. */
export const SLACK_OAUTH_CALLBACK_PATH = '/slack/oauth/callback';

export interface SlackAppView {
  clientId: string;
  /** Masked: the last 4 characters. */
  clientSecret: string;
  /** What to register under the app's OAuth & Permissions, Redirect URLs. */
  redirectUri: string;
  scopes: string[];
  updatedAt: string;
}

/** A user of an environment (the in-app routes' scope). */
export type UserScope = EnvScope & { userId: string };

/** Slack's refusals of the app's own credentials: the app setting is wrong, not the caller's code. */
const APP_CREDENTIAL_ERRORS = new Set(['invalid_client_id', 'bad_client_secret', 'invalid_client']);

const noApp = () =>
  new AppError('NOT_FOUND', 'This environment has no Slack app to install.', 'Set the client id and secret of your Slack app with PUT /settings/slack/app.');

/**
 * Users connect their Slack workspace with OAuth v2 to the environment's Slack app:
 * - Clarion's own flow: authorizeUrl gives Slack's authorize URL with a signed state; Slack
 *   sends the user back to GET /slack/oauth/callback, which exchanges the code;
 * - the pingram SDK's user.generateSlackOauthPath: the caller's own redirect page got the code
 *   and hands it over with its redirect_uri (POST /users/{userId}/slack-oauth).
 * Either way oauth.v2.access answers the install's tokens, stored as the user's slackToken
 * (sealed at rest like every slackToken, masked on reads).
 */
export class SlackOauthService {
  private readonly apps: SlackAppsRepository;
  private readonly clients: SlackClients;

  constructor(
    private readonly deps: Pick<Deps, 'db' | 'secrets' | 'clock' | 'config' | 'logger'>,
    private readonly users: Pick<UsersService, 'identify'>,
  ) {
    this.apps = new SlackAppsRepository(deps.db);
    this.clients = new SlackClients({ apiUrl: deps.config.slackApiUrl, logger: deps.logger, timeoutMs: 10_000 });
  }

  get redirectUri(): string {
    return `${publicBase(this.deps.config)}${SLACK_OAUTH_CALLBACK_PATH}`;
  }

  async getApp(scope: EnvScope): Promise<SlackAppView> {
    const row = await this.apps.find(scope);
    if (!row) throw noApp();
    const secret = this.deps.secrets.decrypt(row.client_secret_enc);
    return { clientId: row.client_id, clientSecret: `****${secret.slice(-4)}`, redirectUri: this.redirectUri, scopes: [...SLACK_BOT_SCOPES], updatedAt: row.updated_at };
  }

  async putApp(scope: EnvScope, app: SlackAppCredentials): Promise<SlackAppView> {
    const now = this.deps.clock.now().toISOString();
    await this.apps.upsert({
      env_id: scope.envId,
      account_id: scope.accountId,
      client_id: app.clientId.trim(),
      client_secret_enc: this.deps.secrets.encrypt(app.clientSecret.trim()),
      created_at: now,
      updated_at: now,
    });
    return this.getApp(scope);
  }

  async deleteApp(scope: EnvScope): Promise<void> {
    if (!(await this.apps.delete(scope))) throw noApp();
  }

  /** Slack's authorize URL for the user, back to Clarion's callback with a state valid for 10 minutes. */
  async authorizeUrl(user: UserScope): Promise<{ url: string; redirectUri: string; expiresAt: string }> {
    const app = await this.app(user);
    const now = this.deps.clock.now();
    const state = await signSlackOauthState(this.deps.secrets, user, now);
    return {
      url: slackAuthorizeUrl(this.deps.config.slackApiUrl, app, this.redirectUri, state),
      redirectUri: this.redirectUri,
      expiresAt: new Date(now.getTime() + STATE_TTL_SECONDS * 1000).toISOString(),
    };
  }

  /** Slack's redirect to Clarion's callback: the signed state names the user, the code is exchanged. */
  async callback(query: { code?: string; state?: string; error?: string }): Promise<User> {
    const user = query.state ? await verifySlackOauthState(this.deps.secrets, query.state, this.deps.clock.now()) : null;
    if (!user) {
      throw new AppError('UNAUTHORIZED', 'The state of this Slack install is missing, forged or expired.', `Start the install again (GET /users/{userId}/slack-oauth); it must be finished within ${STATE_TTL_SECONDS / 60} minutes.`);
    }
    if (query.error) throw invalid(`The Slack install was not completed: ${query.error}.`, 'Start the install again and allow the app in Slack.');
    if (!query.code) throw invalid('Slack sent no code.', 'Start the install again.');
    return this.complete(user, query.code, this.redirectUri);
  }

  /** Exchanges an install's code (oauth.v2.access) and stores its tokens as the user's slackToken. */
  async complete(user: UserScope, code: string, redirectUri: string): Promise<User> {
    const app = await this.app(user);
    let answer: Record<string, unknown>;
    try {
      answer = { ...(await exchangeSlackCode(this.clients, app, code, redirectUri)) };
    } catch (err) {
      const failure = toDeliveryError(err, 'oauth.v2.access');
      if (failure.retryable || APP_CREDENTIAL_ERRORS.has(failure.code)) {
        throw new AppError('PROVIDER_ERROR', `Slack did not complete the install: ${failure.message}`, failure.retryable ? 'Try again.' : 'Check the client id and secret of PUT /settings/slack/app.');
      }
      throw invalid(`Slack refused the code: ${failure.code}.`, 'Codes are single-use and short-lived, and redirect_uri must be the one of the authorize step: start the install again.');
    }
    return this.users.identify(user.accountId, user.envId, { id: user.userId, slackToken: answer }, { touchLastSeen: false });
  }

  private async app(scope: EnvScope): Promise<SlackAppCredentials> {
    const row = await this.apps.find(scope);
    if (!row) throw noApp();
    return { clientId: row.client_id, clientSecret: this.deps.secrets.decrypt(row.client_secret_enc) };
  }
}

import { SlackClients, toDeliveryError } from '../../channels/slack/client.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { type SlackScope, SlackRepository } from './slack.repository.js';

export interface SlackSettingView {
  /** The environment's bot token, masked (`xoxb-****1a2b`); null when the environment has none. */
  botToken: string | null;
  source: 'environment' | 'none';
  /** The workspace the token belongs to, when it was verified on saving. */
  team?: { id: string; name?: string };
  updatedAt?: string;
}

const TOKEN_PATTERN = /^xox[a-z]-[A-Za-z0-9-]{4,250}$/;

/** `xoxb-****1a2b`: the token type and the last 4 characters, enough to tell two tokens apart. */
export function maskSlackToken(token: string): string {
  const prefix = /^xox[a-z]-/.exec(token)?.[0] ?? '';
  return `${prefix}****${token.slice(-4)}`;
}

/**
 * The environment's Slack bot token: the token Slack messages use for users whose `slackToken`
 * has none. Encrypted at rest; never returned in clear.
 */
export class SlackSettingsService {
  private readonly repo: SlackRepository;

  constructor(private readonly deps: Pick<Deps, 'db' | 'secrets' | 'clock' | 'config' | 'logger'>) {
    this.repo = new SlackRepository(deps.db);
  }

  async get(scope: SlackScope): Promise<SlackSettingView> {
    const row = await this.repo.find(scope);
    if (!row) return { botToken: null, source: 'none' };
    return {
      botToken: maskSlackToken(this.deps.secrets.decrypt(row.bot_token_enc)),
      source: 'environment',
      ...(row.team_id ? { team: { id: row.team_id, ...(row.team_name ? { name: row.team_name } : {}) } } : {}),
      updatedAt: row.updated_at,
    };
  }

  /** The bot token in clear, for delivery; undefined when the environment has none. */
  async botToken(scope: SlackScope): Promise<string | undefined> {
    const row = await this.repo.find(scope);
    return row ? this.deps.secrets.decrypt(row.bot_token_enc) : undefined;
  }

  /** Stores the bot token. With `verify`, asks Slack (auth.test) first and keeps its workspace. */
  async put(scope: SlackScope, botToken: string, verify = false): Promise<SlackSettingView> {
    const token = botToken.trim();
    if (!TOKEN_PATTERN.test(token)) {
      throw invalid('botToken is not a Slack token.', 'Use the Bot User OAuth Token of your Slack app (it starts with xoxb-).');
    }
    const team = verify ? await this.verify(token) : undefined;
    const now = this.deps.clock.now().toISOString();
    await this.repo.upsert({
      env_id: scope.envId,
      account_id: scope.accountId,
      bot_token_enc: this.deps.secrets.encrypt(token),
      team_id: team?.id ?? null,
      team_name: team?.name ?? null,
      created_at: now,
      updated_at: now,
    });
    return this.get(scope);
  }

  async delete(scope: SlackScope): Promise<void> {
    if (!(await this.repo.delete(scope))) {
      throw new AppError('NOT_FOUND', 'This environment has no Slack bot token.', 'GET /settings/slack shows the setting; PUT /settings/slack sets one.');
    }
  }

  private async verify(token: string): Promise<{ id?: string; name?: string }> {
    const client = new SlackClients({ apiUrl: this.deps.config.slackApiUrl, logger: this.deps.logger, timeoutMs: 10_000 }).for(token);
    try {
      const res = await client.auth.test();
      return { id: res.team_id, name: res.team };
    } catch (err) {
      const failure = toDeliveryError(err, 'auth.test');
      if (failure.retryable) throw new AppError('PROVIDER_ERROR', `The Slack check could not complete: ${failure.message}`, 'Try again; the setting was not saved.');
      throw invalid(`Slack refused the token: ${failure.code}.`, 'Copy the Bot User OAuth Token from your Slack app (OAuth & Permissions); the setting was not saved.');
    }
  }
}

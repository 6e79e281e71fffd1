import type { Kysely, Selectable } from 'kysely';
import { type EnvScope, EnvSettingsRepository } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';

/** Row type of migration 0064_slack. */
export interface SlackSettingsTable {
  env_id: string;
  account_id: string;
  bot_token_enc: string;
  team_id: string | null;
  team_name: string | null;
  created_at: string;
  updated_at: string;
}

/** Row type of migration 0086: the Slack app an environment's users install with OAuth v2. */
export interface SlackAppsTable {
  env_id: string;
  account_id: string;
  client_id: string;
  client_secret_enc: string;
  created_at: string;
  updated_at: string;
}

export type SlackTables = { slack_settings: SlackSettingsTable; slack_apps: SlackAppsTable };
export type SlackSettingsRow = Selectable<SlackSettingsTable>;
export type SlackAppRow = Selectable<SlackAppsTable>;

export type SlackScope = EnvScope;

export class SlackRepository extends EnvSettingsRepository<SlackSettingsRow> {
  constructor(db: Kysely<CoreTables>) {
    super(db, 'slack_settings');
  }
}

export class SlackAppsRepository extends EnvSettingsRepository<SlackAppRow> {
  constructor(db: Kysely<CoreTables>) {
    super(db, 'slack_apps');
  }
}

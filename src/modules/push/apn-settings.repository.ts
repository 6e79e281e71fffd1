import type { Kysely, Selectable } from 'kysely';
import { type EnvScope, EnvSettingsRepository } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';

/** Row type of migration 0062_apns. */
export interface ApnSettingsTable {
  env_id: string;
  account_id: string;
  key_id: string;
  team_id: string;
  topic: string;
  /** The .p8 key (PEM), sealed with deps.secrets. */
  key_enc: string;
  /** The last characters of the key, enough to recognise it, never enough to use it. */
  key_hint: string;
  created_at: string;
  updated_at: string;
}

export type ApnSettingsTables = { apn_settings: ApnSettingsTable };
export type ApnSettingsRow = Selectable<ApnSettingsTable>;

export type ApnScope = EnvScope;

export class ApnSettingsRepository extends EnvSettingsRepository<ApnSettingsRow> {
  constructor(db: Kysely<CoreTables>) {
    super(db, 'apn_settings');
  }
}

import type { Kysely, Selectable } from 'kysely';
import { type EnvScope, EnvSettingsRepository } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';

/** Row type of migration 0063_fcm. Timestamps are ISO-8601 text. */
export interface FcmSettingsTable {
  env_id: string;
  account_id: string;
  project_id: string;
  client_email: string;
  token_uri: string;
  account_json: string;
  private_key_enc: string;
  created_at: string;
  updated_at: string;
}

export type FcmTables = { fcm_settings: FcmSettingsTable };
export type FcmSettingsRow = Selectable<FcmSettingsTable>;

export type FcmScope = EnvScope;

/** FCM credentials of one environment; every query is scoped by account and environment. */
export class FcmSettingsRepository extends EnvSettingsRepository<FcmSettingsRow> {
  constructor(db: Kysely<CoreTables>) {
    super(db, 'fcm_settings');
  }
}

import type { Kysely, Selectable } from 'kysely';
import { type EnvScope, EnvSettingsRepository } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';

/** Row type of `email_tracking_settings` (migration 0072): an environment's tracking switches. */
export interface EmailTrackingSettingsTable {
  env_id: string;
  account_id: string;
  /** 0/1: the open pixel. */
  track_opens: number;
  /** 0/1: tracked links. */
  track_clicks: number;
  created_at: string;
  updated_at: string;
}

export type EmailTrackingSettingsRow = Selectable<EmailTrackingSettingsTable>;

/** Kysely only: the per-environment tracking switches, scoped by account and environment. */
export class TrackingSettingsRepository {
  private readonly settings: EnvSettingsRepository<EmailTrackingSettingsRow>;
  constructor(db: Kysely<CoreTables>) {
    this.settings = new EnvSettingsRepository<EmailTrackingSettingsRow>(db, 'email_tracking_settings');
  }

  find(scope: EnvScope): Promise<EmailTrackingSettingsRow | undefined> {
    return this.settings.find(scope);
  }

  upsert(row: EmailTrackingSettingsRow): Promise<void> {
    return this.settings.upsert(row);
  }
}

import type { Kysely, Selectable } from 'kysely';
import { type EnvScope, EnvSettingsRepository } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';

/** Row type of `email_settings` (migration 0030_email): an environment's own SMTP server. */
export interface EmailSettingsTable {
  env_id: string;
  account_id: string;
  smtp_url_enc: string;
  created_at: string;
  updated_at: string;
}

export type EmailSettingsRow = Selectable<EmailSettingsTable>;

/** Kysely only: the per-environment SMTP setting, scoped by account and environment. */
export class EmailSettingsRepository {
  private readonly settings: EnvSettingsRepository<EmailSettingsRow>;
  constructor(db: Kysely<CoreTables>) {
    this.settings = new EnvSettingsRepository<EmailSettingsRow>(db, 'email_settings');
  }

  find(scope: EnvScope): Promise<EmailSettingsRow | undefined> {
    return this.settings.find(scope);
  }

  upsert(row: EmailSettingsRow): Promise<void> {
    return this.settings.upsert(row);
  }

  delete(scope: EnvScope): Promise<boolean> {
    return this.settings.delete(scope);
  }
}

import type { Kysely, Selectable } from 'kysely';
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

export interface ApnScope {
  accountId: string;
  envId: string;
}

export class ApnSettingsRepository {
  private readonly db: Kysely<CoreTables & ApnSettingsTables>;
  constructor(db: Kysely<CoreTables> | Kysely<any>) {
    this.db = (db as Kysely<CoreTables>).withTables<ApnSettingsTables>();
  }

  find(scope: ApnScope): Promise<ApnSettingsRow | undefined> {
    return this.db
      .selectFrom('apn_settings')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .executeTakeFirst();
  }

  async upsert(row: ApnSettingsRow): Promise<void> {
    const { key_id, team_id, topic, key_enc, key_hint, updated_at } = row;
    await this.db
      .insertInto('apn_settings')
      .values(row)
      .onConflict((oc) => oc.column('env_id').doUpdateSet({ key_id, team_id, topic, key_enc, key_hint, updated_at }))
      .execute();
  }

  async delete(scope: ApnScope): Promise<boolean> {
    const res = await this.db
      .deleteFrom('apn_settings')
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }
}

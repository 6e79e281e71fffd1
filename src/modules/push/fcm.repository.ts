import type { Kysely, Selectable } from 'kysely';
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

export interface FcmScope {
  accountId: string;
  envId: string;
}

/** FCM credentials of one environment; every query is scoped by account and environment. */
export class FcmSettingsRepository {
  private readonly db: Kysely<CoreTables & FcmTables>;
  constructor(db: Kysely<CoreTables> | Kysely<any>) {
    this.db = (db as Kysely<CoreTables>).withTables<FcmTables>();
  }

  find(scope: FcmScope): Promise<FcmSettingsRow | undefined> {
    return this.db
      .selectFrom('fcm_settings')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .executeTakeFirst();
  }

  async upsert(row: FcmSettingsRow): Promise<void> {
    await this.db
      .insertInto('fcm_settings')
      .values(row)
      .onConflict((oc) =>
        oc.column('env_id').doUpdateSet({
          project_id: row.project_id,
          client_email: row.client_email,
          token_uri: row.token_uri,
          account_json: row.account_json,
          private_key_enc: row.private_key_enc,
          updated_at: row.updated_at,
        }),
      )
      .execute();
  }

  async delete(scope: FcmScope): Promise<boolean> {
    const res = await this.db
      .deleteFrom('fcm_settings')
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }
}

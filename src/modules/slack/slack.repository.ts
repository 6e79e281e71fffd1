import type { Kysely, Selectable } from 'kysely';
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

export type SlackTables = { slack_settings: SlackSettingsTable };
export type SlackSettingsRow = Selectable<SlackSettingsTable>;

export interface SlackScope {
  accountId: string;
  envId: string;
}

export class SlackRepository {
  private readonly db: Kysely<CoreTables & SlackTables>;

  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<SlackTables>();
  }

  find(scope: SlackScope): Promise<SlackSettingsRow | undefined> {
    return this.db
      .selectFrom('slack_settings')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .executeTakeFirst();
  }

  async upsert(row: SlackSettingsRow): Promise<void> {
    await this.db
      .insertInto('slack_settings')
      .values(row)
      .onConflict((oc) =>
        oc.column('env_id').doUpdateSet({ bot_token_enc: row.bot_token_enc, team_id: row.team_id, team_name: row.team_name, updated_at: row.updated_at }),
      )
      .execute();
  }

  async delete(scope: SlackScope): Promise<boolean> {
    const res = await this.db
      .deleteFrom('slack_settings')
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }
}

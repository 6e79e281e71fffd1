import type { Kysely } from 'kysely';

/** The environment a per-environment setting belongs to; both keys scope every query. */
export interface EnvScope {
  accountId: string;
  envId: string;
}

/** The columns every per-environment settings table has (primary key env_id). */
export interface EnvSettingsColumns {
  env_id: string;
  account_id: string;
  created_at: string;
  updated_at: string;
}

/**
 * One settings row per environment in `table` (SMTP server, APNs key, FCM service account,
 * Slack token): read, replace and delete, each scoped by account and environment.
 */
export class EnvSettingsRepository<Row extends EnvSettingsColumns> {
  constructor(
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the table is named at run time (a subclass's Row types what it reads)
    private readonly db: Kysely<any>,
    private readonly table: string,
  ) {}

  find(scope: EnvScope): Promise<Row | undefined> {
    return this.db
      .selectFrom(this.table)
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .executeTakeFirst() as Promise<Row | undefined>;
  }

  /** Inserts the row, or replaces every column of the environment's row but its keys and created_at. */
  async upsert(row: Row): Promise<void> {
    const { env_id: _env, account_id: _account, created_at: _created, ...changes } = row;
    await this.db
      .insertInto(this.table)
      .values(row)
      .onConflict((oc) => oc.column('env_id').doUpdateSet(changes))
      .execute();
  }

  async delete(scope: EnvScope): Promise<boolean> {
    const res = await this.db
      .deleteFrom(this.table)
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .executeTakeFirst();
    return Number(res.numDeletedRows) > 0;
  }
}

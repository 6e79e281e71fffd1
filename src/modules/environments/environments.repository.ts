import type { Kysely, Selectable, Updateable } from 'kysely';
import type { CoreTables, EnvironmentsTable } from '../../storage/schema.js';

export type EnvironmentRow = Selectable<EnvironmentsTable>;

export class EnvironmentsRepository {
  constructor(private readonly db: Kysely<CoreTables>) {}

  insert(row: EnvironmentRow): Promise<unknown> {
    return this.db.insertInto('environments').values(row).execute();
  }

  listByAccount(accountId: string): Promise<EnvironmentRow[]> {
    return this.db
      .selectFrom('environments')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .orderBy('client_id')
      .execute();
  }

  find(accountId: string, clientId: string): Promise<EnvironmentRow | undefined> {
    return this.db
      .selectFrom('environments')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('client_id', '=', clientId)
      .executeTakeFirst();
  }

  /** Credential lookup (Basic auth, in-app clients): the clientId is what identifies the account. */
  /** One environment's sealed client secret, any (none in an empty database): checks the server key opens it. */
  async anySealedSecret(): Promise<string | undefined> {
    return (await this.db.selectFrom('environments').select('client_secret_enc').limit(1).executeTakeFirst())?.client_secret_enc;
  }

  findForAuthentication(clientId: string): Promise<EnvironmentRow | undefined> {
    return this.db.selectFrom('environments').selectAll().where('client_id', '=', clientId).executeTakeFirst();
  }

  async update(accountId: string, clientId: string, patch: Updateable<EnvironmentsTable>): Promise<void> {
    await this.db
      .updateTable('environments')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('client_id', '=', clientId)
      .execute();
  }
}

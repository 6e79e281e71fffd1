import type { Kysely, Selectable } from 'kysely';
import type { AccountsTable, CoreTables } from '../../storage/schema.js';

export type AccountRow = Selectable<AccountsTable>;

export class AccountsRepository {
  constructor(private readonly db: Kysely<CoreTables>) {}

  insert(row: AccountRow): Promise<unknown> {
    return this.db.insertInto('accounts').values(row).execute();
  }

  find(accountId: string): Promise<AccountRow | undefined> {
    return this.db.selectFrom('accounts').selectAll().where('id', '=', accountId).executeTakeFirst();
  }

  async count(): Promise<number> {
    const row = await this.db.selectFrom('accounts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async updateSettings(accountId: string, patch: { name?: string; autoUpgrade?: boolean }, now: string): Promise<void> {
    await this.db
      .updateTable('accounts')
      .set({
        ...(patch.name !== undefined ? { name: patch.name } : {}),
        ...(patch.autoUpgrade !== undefined ? { auto_upgrade: patch.autoUpgrade ? 1 : 0 } : {}),
        updated_at: now,
      })
      .where('id', '=', accountId)
      .execute();
  }
}

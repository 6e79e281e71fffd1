import type { Kysely, Selectable } from 'kysely';
import type { ApiKeysTable, CoreTables } from '../../storage/schema.js';

export type ApiKeyRow = Selectable<ApiKeysTable>;

export class KeysRepository {
  constructor(private readonly db: Kysely<CoreTables>) {}

  insert(row: ApiKeyRow): Promise<unknown> {
    return this.db.insertInto('api_keys').values(row).execute();
  }

  listByAccount(accountId: string): Promise<ApiKeyRow[]> {
    return this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
  }

  /** Credential lookup by the hash of the presented key. */
  findByHash(keyHash: string): Promise<ApiKeyRow | undefined> {
    return this.db.selectFrom('api_keys').selectAll().where('key_hash', '=', keyHash).executeTakeFirst();
  }

  async revoke(accountId: string, keyId: string): Promise<boolean> {
    const result = await this.db
      .updateTable('api_keys')
      .set({ revoked: 1 })
      .where('account_id', '=', accountId)
      .where('id', '=', keyId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async touch(keyId: string, at: string): Promise<void> {
    await this.db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', keyId).execute();
  }
}

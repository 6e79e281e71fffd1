import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';

/** Row type of migration 0061_web_push. */
export interface WebPushSettingsTable {
  env_id: string;
  account_id: string;
  /** Uncompressed P-256 point, base64url (the browser's applicationServerKey). */
  public_key: string;
  /** Sealed (Secrets.encrypt) base64url of the 32-byte private scalar. */
  private_key_enc: string;
  created_at: string;
}

export type WebPushTables = { web_push_settings: WebPushSettingsTable };
export type WebPushSettingsRow = Selectable<WebPushSettingsTable>;

/** Every query names both the account and the environment of the caller. */
export class WebPushRepository {
  private readonly db: Kysely<CoreTables & WebPushTables>;

  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<WebPushTables>();
  }

  find(accountId: string, envId: string): Promise<WebPushSettingsRow | undefined> {
    return this.db
      .selectFrom('web_push_settings')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .executeTakeFirst();
  }

  /** Inserts unless the environment already has keys (another process may generate them at the same time). */
  async insertIfAbsent(row: WebPushSettingsRow): Promise<void> {
    await this.db
      .insertInto('web_push_settings')
      .values(row)
      .onConflict((oc) => oc.column('env_id').doNothing())
      .execute();
  }
}

import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { IdempotencyKeysTable, SendingDb, SendingTables } from './sending.tables.js';

export type IdempotencyRow = Selectable<IdempotencyKeysTable>;

export class IdempotencyRepository {
  private readonly db: SendingDb;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<SendingTables>();
  }

  find(envId: string, key: string): Promise<IdempotencyRow | undefined> {
    return this.db.selectFrom('idempotency_keys').selectAll().where('env_id', '=', envId).where('key', '=', key).executeTakeFirst();
  }

  /** Inserts the key; false when another request holds it already. */
  async insert(row: IdempotencyRow): Promise<boolean> {
    const res = await this.db
      .insertInto('idempotency_keys')
      .values(row)
      .onConflict((oc) => oc.columns(['env_id', 'key']).doNothing())
      .executeTakeFirst();
    return Number(res.numInsertedOrUpdatedRows ?? 0n) === 1;
  }

  /**
   * Inserts the keys of a batch of sends; returns the tracking ids whose key this call inserted
   * (a key held already, or taken by an earlier row of the same batch, is not theirs).
   */
  async claimMany(rows: IdempotencyRow[]): Promise<Set<string>> {
    if (rows.length === 0) return new Set();
    const inserted = await this.db
      .insertInto('idempotency_keys')
      .values(rows)
      .onConflict((oc) => oc.columns(['env_id', 'key']).doNothing())
      .returning('tracking_id')
      .execute();
    return new Set(inserted.map((r) => r.tracking_id));
  }

  /** Gives back keys claimed by sends that were then refused (claimMany). */
  async releaseMany(rows: IdempotencyRow[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db
      .deleteFrom('idempotency_keys')
      .where((eb) => eb.or(rows.map((r) => eb.and([eb('env_id', '=', r.env_id), eb('key', '=', r.key), eb('tracking_id', '=', r.tracking_id)]))))
      .execute();
  }

  async replace(row: IdempotencyRow): Promise<void> {
    await this.db
      .updateTable('idempotency_keys')
      .set({ request_hash: row.request_hash, tracking_id: row.tracking_id, response: row.response, created_at: row.created_at })
      .where('env_id', '=', row.env_id)
      .where('key', '=', row.key)
      .execute();
  }

  async purgeBefore(before: string): Promise<void> {
    await this.db.deleteFrom('idempotency_keys').where('created_at', '<', before).execute();
  }
}

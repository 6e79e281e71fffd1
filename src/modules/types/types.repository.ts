import type { Selectable, Updateable } from 'kysely';
import { type AnyDb, type NotificationTypesTable, templatesDb } from '../templates/templates.tables.js';

export type NotificationTypeRow = Selectable<NotificationTypesTable>;

/**
 * Kysely only; every query scoped by account and environment. Pass a transaction to join one.
 * `lockRows`: the *Locked reads take a row lock (PostgreSQL; SQLite serializes writers itself).
 */
export class TypesRepository {
  constructor(
    private readonly db: AnyDb,
    private readonly lockRows = false,
  ) {}

  /** Inserts unless the type exists; true when this call created it. */
  async insertIfMissing(row: NotificationTypeRow): Promise<boolean> {
    const result = await templatesDb(this.db)
      .insertInto('notification_types')
      .values(row)
      .onConflict((oc) => oc.columns(['env_id', 'notification_id']).doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  /** Inserts the types that do not exist yet (a batch of sends creating their types on first use). */
  async insertManyIfMissing(rows: NotificationTypeRow[]): Promise<void> {
    if (rows.length === 0) return;
    await templatesDb(this.db)
      .insertInto('notification_types')
      .values(rows)
      .onConflict((oc) => oc.columns(['env_id', 'notification_id']).doNothing())
      .execute();
  }

  find(accountId: string, envId: string, notificationId: string): Promise<NotificationTypeRow | undefined> {
    return this.findQuery(accountId, envId, notificationId).executeTakeFirst();
  }

  /**
   * find, with the row locked FOR NO KEY UPDATE until the transaction ends: the writers of a
   * type's templates and their defaults queue on it, and the type's deletion (which takes FOR
   * UPDATE) waits for them or they for it. Rows referencing the type can still be inserted
   * meanwhile (their foreign-key check takes only FOR KEY SHARE).
   */
  findLockedForWrite(accountId: string, envId: string, notificationId: string): Promise<NotificationTypeRow | undefined> {
    let query = this.findQuery(accountId, envId, notificationId);
    if (this.lockRows) query = query.forNoKeyUpdate();
    return query.executeTakeFirst();
  }

  /**
   * find, with the row locked FOR KEY SHARE until the transaction ends, as a foreign-key check
   * would lock it: the type cannot be deleted before then (undefined when a deletion committed
   * first), and no other writer waits.
   */
  findLockedAgainstDelete(accountId: string, envId: string, notificationId: string): Promise<NotificationTypeRow | undefined> {
    let query = this.findQuery(accountId, envId, notificationId);
    if (this.lockRows) query = query.forKeyShare();
    return query.executeTakeFirst();
  }

  private findQuery(accountId: string, envId: string, notificationId: string) {
    return templatesDb(this.db)
      .selectFrom('notification_types')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('notification_id', '=', notificationId);
  }

  list(accountId: string, envId: string): Promise<NotificationTypeRow[]> {
    return templatesDb(this.db)
      .selectFrom('notification_types')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .orderBy('created_at')
      .orderBy('notification_id')
      .execute();
  }

  /** Every type of every environment that sets a retention (the hourly purge, which is scoped by each one's environment and type). */
  withRetention(): Promise<Pick<NotificationTypeRow, 'account_id' | 'env_id' | 'notification_id' | 'retention'>[]> {
    return templatesDb(this.db)
      .selectFrom('notification_types')
      .select(['account_id', 'env_id', 'notification_id', 'retention'])
      .where('retention', 'is not', null)
      .orderBy('env_id')
      .orderBy('notification_id')
      .execute();
  }

  async update(accountId: string, envId: string, notificationId: string, patch: Updateable<NotificationTypesTable>): Promise<void> {
    await templatesDb(this.db)
      .updateTable('notification_types')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('notification_id', '=', notificationId)
      .execute();
  }

  /** Templates, their defaults and component references go with it (foreign keys cascade). */
  async delete(accountId: string, envId: string, notificationId: string): Promise<boolean> {
    const result = await templatesDb(this.db)
      .deleteFrom('notification_types')
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('notification_id', '=', notificationId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** (notification, channel, templateId) of the environment, optionally of one notification. */
  templateIds(accountId: string, envId: string, notificationId?: string) {
    let query = templatesDb(this.db)
      .selectFrom('templates')
      .select(['notification_id', 'channel', 'template_id'])
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId);
    if (notificationId !== undefined) query = query.where('notification_id', '=', notificationId);
    return query.orderBy('notification_id').orderBy('channel').orderBy('created_at').orderBy('template_id').execute();
  }
}

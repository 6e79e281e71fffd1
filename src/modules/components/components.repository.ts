import type { Selectable, Updateable } from 'kysely';
import { type AnyDb, type ComponentRefsTable, type ComponentsTable, templatesDb } from '../templates/templates.tables.js';

export type ComponentRow = Selectable<ComponentsTable>;
export type ComponentRefRow = Selectable<ComponentRefsTable>;

/** Kysely only; every query scoped by account and environment. */
export class ComponentsRepository {
  constructor(private readonly db: AnyDb) {}

  private get q() {
    return templatesDb(this.db);
  }

  async insertIfMissing(row: ComponentRow): Promise<boolean> {
    const result = await this.q
      .insertInto('components')
      .values(row)
      .onConflict((oc) => oc.columns(['env_id', 'component_id']).doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  list(accountId: string, envId: string): Promise<ComponentRow[]> {
    return this.q
      .selectFrom('components')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .orderBy('created_at')
      .orderBy('component_id')
      .execute();
  }

  find(accountId: string, envId: string, componentId: string): Promise<ComponentRow | undefined> {
    return this.q
      .selectFrom('components')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('component_id', '=', componentId)
      .executeTakeFirst();
  }

  findMany(accountId: string, envId: string, componentIds: string[]): Promise<Pick<ComponentRow, 'component_id' | 'html'>[]> {
    if (componentIds.length === 0) return Promise.resolve([]);
    return this.q
      .selectFrom('components')
      .select(['component_id', 'html'])
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('component_id', 'in', componentIds)
      .execute();
  }

  async update(accountId: string, envId: string, componentId: string, patch: Updateable<ComponentsTable>): Promise<void> {
    await this.q
      .updateTable('components')
      .set(patch)
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('component_id', '=', componentId)
      .execute();
  }

  async delete(accountId: string, envId: string, componentId: string): Promise<void> {
    await this.q
      .deleteFrom('components')
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('component_id', '=', componentId)
      .execute();
  }

  /** References of the given components (all of the environment's when `componentIds` is omitted). */
  refs(accountId: string, envId: string, componentIds?: string[]): Promise<ComponentRefRow[]> {
    let query = this.q.selectFrom('component_refs').selectAll().where('account_id', '=', accountId).where('env_id', '=', envId);
    if (componentIds !== undefined) {
      if (componentIds.length === 0) return Promise.resolve([]);
      query = query.where('component_id', 'in', componentIds);
    }
    return query.orderBy('notification_id').orderBy('channel').orderBy('template_id').execute();
  }
}

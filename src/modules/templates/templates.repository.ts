import type { Selectable } from 'kysely';
import { type AnyDb, type TemplateDefaultsTable, type TemplatesTable, templatesDb } from './templates.tables.js';

export type TemplateRow = Selectable<TemplatesTable>;
export type TemplateDefaultRow = Selectable<TemplateDefaultsTable>;

export interface TemplateKey {
  accountId: string;
  envId: string;
  notificationId: string;
  channel: string;
}

/** The four columns that name one notification's templates on one channel. */
const keyFilter = (k: TemplateKey) => ({ account_id: k.accountId, env_id: k.envId, notification_id: k.notificationId, channel: k.channel });

/**
 * Kysely only; every query scoped by account and environment. Construct over a transaction to join it.
 * `lockRows`: findForUpdate takes a row lock (PostgreSQL; SQLite serializes writers itself).
 */
export class TemplatesRepository {
  constructor(
    private readonly db: AnyDb,
    private readonly lockRows = false,
  ) {}

  private get q() {
    return templatesDb(this.db);
  }

  list(k: TemplateKey): Promise<TemplateRow[]> {
    return this.q
      .selectFrom('templates')
      .selectAll()
      .where((eb) => eb.and(keyFilter(k)))
      .orderBy('created_at')
      .orderBy('template_id')
      .execute();
  }

  find(k: TemplateKey, templateId: string): Promise<TemplateRow | undefined> {
    return this.q
      .selectFrom('templates')
      .selectAll()
      .where((eb) => eb.and(keyFilter(k)))
      .where('template_id', '=', templateId)
      .executeTakeFirst();
  }

  /** find, with the row locked until the transaction ends (when lockRows), for a read-modify-write of its content. */
  findForUpdate(k: TemplateKey, templateId: string): Promise<TemplateRow | undefined> {
    let query = this.q
      .selectFrom('templates')
      .selectAll()
      .where((eb) => eb.and(keyFilter(k)))
      .where('template_id', '=', templateId);
    if (this.lockRows) query = query.forUpdate();
    return query.executeTakeFirst();
  }

  /** The channels on which the notification has any template (one query for the send pipeline). */
  async channelsWithTemplates(accountId: string, envId: string, notificationId: string): Promise<Set<string>> {
    const rows = await this.q
      .selectFrom('templates')
      .select('channel')
      .distinct()
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('notification_id', '=', notificationId)
      .execute();
    return new Set(rows.map((r) => r.channel));
  }

  /** Whether the notification has a template with this id on any channel (send-time warning). */
  async anyWithId(accountId: string, envId: string, notificationId: string, templateId: string): Promise<boolean> {
    const row = await this.q
      .selectFrom('templates')
      .select('template_id')
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('notification_id', '=', notificationId)
      .where('template_id', '=', templateId)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** False when the template id is taken. */
  async insertIfMissing(row: TemplateRow): Promise<boolean> {
    const result = await this.q
      .insertInto('templates')
      .values(row)
      .onConflict((oc) => oc.columns(['env_id', 'notification_id', 'channel', 'template_id']).doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async updateContent(k: TemplateKey, templateId: string, content: string, updatedAt: string): Promise<void> {
    await this.q
      .updateTable('templates')
      .set({ content, updated_at: updatedAt })
      .where((eb) => eb.and(keyFilter(k)))
      .where('template_id', '=', templateId)
      .execute();
  }

  /** Its default rows and component references are removed by the foreign keys' cascade. */
  async delete(k: TemplateKey, templateId: string): Promise<void> {
    await this.q
      .deleteFrom('templates')
      .where((eb) => eb.and(keyFilter(k)))
      .where('template_id', '=', templateId)
      .execute();
  }

  defaults(k: TemplateKey): Promise<TemplateDefaultRow[]> {
    return this.q
      .selectFrom('template_defaults')
      .selectAll()
      .where((eb) => eb.and(keyFilter(k)))
      .execute();
  }

  /** Makes the template the default for the modes that have none yet (first template wins, races included). */
  async claimDefaults(k: TemplateKey, templateId: string, modes: readonly string[]): Promise<void> {
    if (modes.length === 0) return;
    await this.q
      .insertInto('template_defaults')
      .values(modes.map((mode) => this.defaultRow(k, templateId, mode)))
      .onConflict((oc) => oc.columns(['env_id', 'notification_id', 'channel', 'mode']).doNothing())
      .execute();
  }

  /** Makes the template the default for these modes, replacing the previous default of each. */
  async setDefaults(k: TemplateKey, templateId: string, modes: readonly string[]): Promise<void> {
    if (modes.length === 0) return;
    await this.q
      .insertInto('template_defaults')
      .values(modes.map((mode) => this.defaultRow(k, templateId, mode)))
      .onConflict((oc) => oc.columns(['env_id', 'notification_id', 'channel', 'mode']).doUpdateSet({ template_id: templateId }))
      .execute();
  }

  private defaultRow(k: TemplateKey, templateId: string, mode: string): TemplateDefaultRow {
    return { env_id: k.envId, notification_id: k.notificationId, channel: k.channel, mode, template_id: templateId, account_id: k.accountId };
  }

  componentIdsOf(k: TemplateKey, templateId: string): Promise<{ component_id: string }[]> {
    return this.q
      .selectFrom('component_refs')
      .select('component_id')
      .where((eb) => eb.and(keyFilter(k)))
      .where('template_id', '=', templateId)
      .execute();
  }

  async replaceComponentRefs(k: TemplateKey, templateId: string, componentIds: string[]): Promise<void> {
    await this.q
      .deleteFrom('component_refs')
      .where((eb) => eb.and(keyFilter(k)))
      .where('template_id', '=', templateId)
      .execute();
    if (componentIds.length === 0) return;
    await this.q
      .insertInto('component_refs')
      .values(
        componentIds.map((componentId) => ({
          env_id: k.envId,
          component_id: componentId,
          notification_id: k.notificationId,
          channel: k.channel,
          template_id: templateId,
          account_id: k.accountId,
        })),
      )
      .execute();
  }

  /** Component ids among `ids` that exist in the environment. */
  async existingComponents(accountId: string, envId: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.q
      .selectFrom('components')
      .select('component_id')
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('component_id', 'in', ids)
      .execute();
    return new Set(rows.map((r) => r.component_id));
  }
}

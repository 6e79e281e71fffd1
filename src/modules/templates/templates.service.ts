import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../errors.js';
import { COMPONENT_TAG_EXAMPLE, LiquidRenderer } from '../../rendering/liquid.js';
import { TypesRepository } from '../types/types.repository.js';
import { ensureType } from '../types/types.service.js';
import {
  DELIVERY_MODES,
  type DeliveryMode,
  type TemplateChannel,
  type TemplateContent,
  parseTemplateChannel,
  validateContent,
} from './template-fields.js';
import { type TemplateDefaultRow, type TemplateKey, type TemplateRow, TemplatesRepository } from './templates.repository.js';
import { type AnyDb, COMPONENT_REF_FK, isForeignKeyViolation, violatedConstraint } from './templates.tables.js';

/** Template record as returned (SDK Template / GetTemplatesResponse): identity, default flags, content. */
export type TemplateRecord = {
  envId: string;
  notificationId: string;
  templateId: string;
  channel: TemplateChannel;
  default: boolean;
  isDefaultFor: Record<DeliveryMode, boolean>;
} & TemplateContent;

export interface ResolvedTemplate {
  templateId: string;
  channel: TemplateChannel;
  content: TemplateContent;
  /** Whether it is the default for the requested mode. */
  default: boolean;
  /** Set when the requested templateId did not exist and the default was used instead. */
  warning?: string;
}

export type TemplateBody = TemplateContent & { templateId: string };

/**
 * Every write of a notification's templates and defaults (create, update, delete, default
 * selection) runs in one transaction that first locks the notification type's row (PostgreSQL;
 * SQLite has one writer): the writes of one type run one at a time, each reading what the one
 * before committed, so no change is lost, a template deleted meanwhile is a 404, and every
 * delivery mode keeps exactly one default. Locks are taken in one order, the one a type's
 * deletion takes too (type, then templates, defaults, component references), so none deadlock.
 */
export class TemplatesService {
  constructor(
    private readonly deps: Deps,
    /** Checks the Liquid of what is stored (its parse cache is this service's, or shared by the services object). */
    private readonly renderer = new LiquidRenderer(),
  ) {}

  private get lockRows(): boolean {
    return this.deps.storage.dialect === 'postgres';
  }

  private key(accountId: string, envId: string, notificationId: string, channel: string): TemplateKey {
    return { accountId, envId, notificationId, channel: parseTemplateChannel(channel) };
  }

  async list(accountId: string, envId: string, notificationId: string, channel: string): Promise<TemplateRecord[]> {
    const k = this.key(accountId, envId, notificationId, channel);
    const repo = new TemplatesRepository(this.deps.db);
    const [rows, defaults] = await Promise.all([repo.list(k), repo.defaults(k)]);
    return rows.map((row) => toRecord(row, defaults));
  }

  async get(accountId: string, envId: string, notificationId: string, channel: string, templateId: string): Promise<TemplateRecord> {
    const k = this.key(accountId, envId, notificationId, channel);
    return this.read(new TemplatesRepository(this.deps.db), k, templateId);
  }

  /**
   * Creates a template; the notification type is created when missing (as a send would). The
   * first template of a notification + channel becomes its default for every delivery mode.
   */
  async create(accountId: string, envId: string, notificationId: string, channel: string, body: TemplateBody): Promise<TemplateRecord> {
    const k = this.key(accountId, envId, notificationId, channel);
    const { templateId, ...content } = body;
    if (templateId === 'default-selection') throw invalid('"default-selection" is reserved.', 'Pick another templateId.');
    const { componentIds } = validateContent(this.renderer, k.channel as TemplateChannel, content);
    const now = this.deps.clock.now().toISOString();
    return this.writing(k, templateId, async (trx) => {
      const repo = new TemplatesRepository(trx);
      await this.ensureLockedType(trx, k);
      await this.requireComponents(repo, k, componentIds);
      const inserted = await repo.insertIfMissing({
        env_id: envId,
        notification_id: notificationId,
        channel: k.channel,
        template_id: templateId,
        account_id: accountId,
        content: JSON.stringify(clean(content)),
        created_at: now,
        updated_at: now,
      });
      if (!inserted) {
        throw new AppError(
          'CONFLICT',
          `Template "${templateId}" already exists for notification "${notificationId}" on ${k.channel}.`,
          `Update it with PATCH /notifications/${notificationId}/${k.channel}/templates/${templateId}, or pick another templateId.`,
        );
      }
      await repo.replaceComponentRefs(k, templateId, componentIds);
      await repo.claimDefaults(k, templateId, DELIVERY_MODES);
      return this.read(repo, k, templateId);
    });
  }

  /** Replaces the given content fields; the component references follow the new html. */
  async update(
    accountId: string,
    envId: string,
    notificationId: string,
    channel: string,
    templateId: string,
    patch: TemplateContent,
  ): Promise<TemplateRecord> {
    const k = this.key(accountId, envId, notificationId, channel);
    validateContent(this.renderer, k.channel as TemplateChannel, patch);
    return this.writing(k, templateId, async (trx) => {
      const repo = new TemplatesRepository(trx, this.lockRows);
      await this.lockType(trx, k, templateId);
      const row = templateOrThrow(await repo.findForUpdate(k, templateId), k, templateId);
      const merged = clean({ ...(JSON.parse(row.content) as TemplateContent), ...patch });
      const { componentIds } = validateContent(this.renderer, k.channel as TemplateChannel, merged);
      await this.requireComponents(repo, k, componentIds);
      await repo.updateContent(k, templateId, JSON.stringify(merged), this.deps.clock.now().toISOString());
      await repo.replaceComponentRefs(k, templateId, componentIds);
      return this.read(repo, k, templateId);
    });
  }

  /** Deletes a template; for each mode it was the default of, the oldest remaining template takes over. */
  async delete(accountId: string, envId: string, notificationId: string, channel: string, templateId: string): Promise<void> {
    const k = this.key(accountId, envId, notificationId, channel);
    await this.writing(k, templateId, async (trx) => {
      const repo = new TemplatesRepository(trx);
      await this.lockType(trx, k, templateId);
      await this.findOrThrow(repo, k, templateId);
      const orphaned = (await repo.defaults(k)).filter((d) => d.template_id === templateId).map((d) => d.mode);
      await repo.delete(k, templateId);
      const successor = (await repo.list(k))[0];
      if (successor && orphaned.length > 0) await repo.claimDefaults(k, successor.template_id, orphaned);
    });
  }

  /** Makes the template the default for `modes` (instant when none are given), unsetting the previous ones. */
  async setDefault(
    accountId: string,
    envId: string,
    notificationId: string,
    channel: string,
    templateId: string,
    modes: DeliveryMode[] | undefined,
  ): Promise<TemplateRecord> {
    const k = this.key(accountId, envId, notificationId, channel);
    const chosen = modes && modes.length > 0 ? [...new Set(modes)] : (['instant'] as DeliveryMode[]);
    return this.writing(k, templateId, async (trx) => {
      const repo = new TemplatesRepository(trx);
      await this.lockType(trx, k, templateId);
      await this.findOrThrow(repo, k, templateId);
      await repo.setDefaults(k, templateId, chosen);
      return this.read(repo, k, templateId);
    });
  }

  /**
   * For the send pipeline: the content of `templateId`, or of the default template (for `mode`,
   * falling back to the instant default) with a `warning` when `templateId` is unknown; null when
   * the notification has no template on this channel.
   */
  async resolveTemplate(
    accountId: string,
    envId: string,
    notificationId: string,
    channel: string,
    templateId?: string,
    mode: DeliveryMode = 'instant',
    db: AnyDb = this.deps.db,
  ): Promise<ResolvedTemplate | null> {
    const k = this.key(accountId, envId, notificationId, channel);
    const repo = new TemplatesRepository(db);
    const defaults = await repo.defaults(k);
    const defaultId = (defaults.find((d) => d.mode === mode) ?? defaults.find((d) => d.mode === 'instant'))?.template_id;
    if (templateId !== undefined) {
      const row = await repo.find(k, templateId);
      if (row) return { templateId, channel: k.channel as TemplateChannel, content: JSON.parse(row.content) as TemplateContent, default: defaultId === templateId };
    }
    if (defaultId === undefined) return null;
    const row = await repo.find(k, defaultId);
    if (!row) return null;
    return {
      templateId: defaultId,
      channel: k.channel as TemplateChannel,
      content: JSON.parse(row.content) as TemplateContent,
      default: true,
      ...(templateId !== undefined
        ? { warning: `Template "${templateId}" does not exist for notification "${notificationId}" on ${k.channel}; the default template "${defaultId}" was used.` }
        : {}),
    };
  }

  /**
   * A type's digest template on a channel for a digest mode (hourly, daily, weekly, monthly): the
   * template that is the default for that mode (setDefault with `modes`), unless it is the instant
   * default too. The first template of a channel becomes the default of every mode, so without
   * this rule a type's one instant template would render its digests, a single message's template
   * over a list of items; null then, and the built-in digest template applies (docs/digests.md).
   */
  async digestTemplate(accountId: string, envId: string, notificationId: string, channel: string, mode: Exclude<DeliveryMode, 'instant'>): Promise<ResolvedTemplate | null> {
    const k = this.key(accountId, envId, notificationId, channel);
    const repo = new TemplatesRepository(this.deps.db);
    const defaults = await repo.defaults(k);
    const templateId = defaults.find((d) => d.mode === mode)?.template_id;
    if (templateId === undefined || defaults.some((d) => d.mode === 'instant' && d.template_id === templateId)) return null;
    const row = await repo.find(k, templateId);
    if (!row) return null;
    return { templateId: row.template_id, channel: k.channel as TemplateChannel, content: JSON.parse(row.content) as TemplateContent, default: true };
  }

  private async read(repo: TemplatesRepository, k: TemplateKey, templateId: string): Promise<TemplateRecord> {
    const row = await this.findOrThrow(repo, k, templateId);
    return toRecord(row, await repo.defaults(k));
  }

  private async findOrThrow(repo: TemplatesRepository, k: TemplateKey, templateId: string): Promise<TemplateRow> {
    return templateOrThrow(await repo.find(k, templateId), k, templateId);
  }

  /** Takes the type's write lock (see the class); without the type there is no template: its 404. */
  private async lockType(trx: AnyDb, k: TemplateKey, templateId: string): Promise<void> {
    const type = await new TypesRepository(trx, this.lockRows).findLockedForWrite(k.accountId, k.envId, k.notificationId);
    if (!type) throw templateNotFound(k, templateId);
  }

  /**
   * ensureType, then the type's write lock. A type deleted between the two (DELETE /types) is
   * created again, by this transaction then, as a create on a missing type does.
   */
  private async ensureLockedType(trx: AnyDb, k: TemplateKey): Promise<void> {
    const types = new TypesRepository(trx, this.lockRows);
    for (let attempt = 1; ; attempt++) {
      await ensureType(this.deps, k.accountId, k.envId, k.notificationId, trx);
      if (await types.findLockedForWrite(k.accountId, k.envId, k.notificationId)) return;
      if (attempt === 3) {
        throw new AppError('CONFLICT', `Notification type "${k.notificationId}" was deleted while the template was being created.`, 'Send the request again.');
      }
    }
  }

  private async requireComponents(repo: TemplatesRepository, k: TemplateKey, componentIds: string[]): Promise<void> {
    const existing = await repo.existingComponents(k.accountId, k.envId, componentIds);
    const missing = componentIds.filter((id) => !existing.has(id));
    if (missing.length > 0) throw unknownComponents(missing);
  }

  /**
   * One transaction per write. A component deleted after requireComponents read it surfaces as
   * the violation of the reference's foreign key (SQLite names no constraint; its one writer can
   * only meet that one); any other foreign key means the template or its type went meanwhile.
   */
  private async writing<T>(k: TemplateKey, templateId: string, fn: (trx: AnyDb) => Promise<T>): Promise<T> {
    try {
      return await this.deps.db.transaction().execute(fn);
    } catch (err) {
      if (!isForeignKeyViolation(err)) throw err;
      const constraint = violatedConstraint(err);
      throw constraint === undefined || constraint === COMPONENT_REF_FK ? unknownComponents([]) : templateNotFound(k, templateId);
    }
  }
}

function templateNotFound(k: TemplateKey, templateId: string): AppError {
  return notFound(
    `Template`,
    `${k.notificationId}/${k.channel}/${templateId}`,
    `List the templates with GET /notifications/${k.notificationId}/${k.channel}/templates.`,
  );
}

function templateOrThrow(row: TemplateRow | undefined, k: TemplateKey, templateId: string): TemplateRow {
  if (!row) throw templateNotFound(k, templateId);
  return row;
}

function unknownComponents(ids: string[]): AppError {
  const list = ids.map((id) => `"${id}"`).join(', ');
  return invalid(
    ids.length > 0 ? `The html references component${ids.length > 1 ? 's' : ''} ${list}, which do${ids.length > 1 ? '' : 'es'} not exist in this environment.` : 'The html references a component that does not exist in this environment.',
    `Create the component with POST /components first, or remove the ${COMPONENT_TAG_EXAMPLE} tag.`,
  );
}

/** Drops undefined values so stored JSON only holds fields that were given. */
function clean<T extends object>(content: T): T {
  return Object.fromEntries(Object.entries(content).filter(([, v]) => v !== undefined)) as T;
}

function toRecord(row: TemplateRow, defaults: TemplateDefaultRow[]): TemplateRecord {
  const isDefaultFor = Object.fromEntries(
    DELIVERY_MODES.map((mode) => [mode, defaults.some((d) => d.mode === mode && d.template_id === row.template_id)]),
  ) as Record<DeliveryMode, boolean>;
  return {
    envId: row.env_id,
    notificationId: row.notification_id,
    templateId: row.template_id,
    channel: row.channel as TemplateChannel,
    default: isDefaultFor.instant,
    isDefaultFor,
    ...(JSON.parse(row.content) as TemplateContent),
  };
}

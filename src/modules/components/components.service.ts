import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../errors.js';
import { type ComponentResolver, LiquidRenderer, TemplateRenderError } from '../../rendering/liquid.js';
import type { Channel } from '../../http/schemas.js';
import { type AnyDb, isForeignKeyViolation } from '../templates/templates.tables.js';
import { type ComponentRefRow, type ComponentRow, ComponentsRepository } from './components.repository.js';

export interface ComponentReference {
  notificationId: string;
  channel: Channel;
  templateId: string;
}

/** Email component as returned (SDK EmailComponentResponse). */
export interface Component {
  envId: string;
  componentId: string;
  name: string;
  internal: string;
  internalPage: string;
  html: string;
  createdAt: string;
  modifiedAt: string;
  referencedBy: ComponentReference[];
  channel: 'EMAIL';
}

export interface ComponentCreate {
  componentId: string;
  name: string;
  internal?: string;
  internalPage?: string;
  html?: string;
}
export type ComponentPatch = Partial<Omit<ComponentCreate, 'componentId'>>;

/**
 * For the send pipeline: looks up the html of the environment's components by id, as the
 * renderer's `resolveComponents` (see rendering/liquid.ts renderEmailHtml).
 */
export function componentResolver(deps: Pick<Deps, 'db'>, accountId: string, envId: string, db: AnyDb = deps.db): ComponentResolver {
  return async (ids) => {
    const rows = await new ComponentsRepository(db).findMany(accountId, envId, ids);
    return new Map(rows.map((r) => [r.component_id, r.html]));
  };
}

export class ComponentsService {
  private readonly repo: ComponentsRepository;
  constructor(
    private readonly deps: Deps,
    /** Checks the Liquid of a component's html (see TemplatesService). */
    private readonly renderer = new LiquidRenderer(),
  ) {
    this.repo = new ComponentsRepository(deps.db);
  }

  async list(accountId: string, envId: string): Promise<Component[]> {
    const [rows, refs] = await Promise.all([this.repo.list(accountId, envId), this.repo.refs(accountId, envId)]);
    return rows.map((row) => toComponent(row, refs));
  }

  /**
   * The list with `internal` (the editor's JSON document, stored as text) parsed; an `internal`
   * that is not JSON (written by hand through the API) stays the string it is.
   */
  async listParsed(accountId: string, envId: string): Promise<(Omit<Component, 'internal'> & { internal: unknown })[]> {
    return (await this.list(accountId, envId)).map((c) => ({ ...c, internal: parseOrKeep(c.internal) }));
  }

  async get(accountId: string, envId: string, componentId: string): Promise<Component> {
    const row = await this.repo.find(accountId, envId, componentId);
    if (!row) throw notFound('Component', componentId, 'List components with GET /components.');
    return toComponent(row, await this.repo.refs(accountId, envId, [componentId]));
  }

  async create(accountId: string, envId: string, body: ComponentCreate): Promise<Component> {
    const html = body.html ?? '';
    checkHtml(this.renderer, html);
    const now = this.deps.clock.now().toISOString();
    const inserted = await this.repo.insertIfMissing({
      env_id: envId,
      component_id: body.componentId,
      account_id: accountId,
      name: body.name,
      internal: body.internal ?? '',
      internal_page: body.internalPage ?? '',
      html,
      created_at: now,
      updated_at: now,
    });
    if (!inserted) {
      throw new AppError('CONFLICT', `Component "${body.componentId}" already exists.`, `Update it with PATCH /components/${body.componentId}, or pick another componentId.`);
    }
    return this.get(accountId, envId, body.componentId);
  }

  /** Templates that include the component render its new html from their next send on. */
  async update(accountId: string, envId: string, componentId: string, patch: ComponentPatch): Promise<Component> {
    await this.get(accountId, envId, componentId);
    if (patch.html !== undefined) checkHtml(this.renderer, patch.html);
    await this.repo.update(accountId, envId, componentId, {
      ...(patch.name !== undefined ? { name: patch.name } : {}),
      ...(patch.internal !== undefined ? { internal: patch.internal } : {}),
      ...(patch.internalPage !== undefined ? { internal_page: patch.internalPage } : {}),
      ...(patch.html !== undefined ? { html: patch.html } : {}),
      updated_at: this.deps.clock.now().toISOString(),
    });
    return this.get(accountId, envId, componentId);
  }

  /** Refused while a template references it; the foreign key also refuses it under a concurrent template write. */
  async delete(accountId: string, envId: string, componentId: string): Promise<void> {
    try {
      await this.deps.db.transaction().execute(async (trx) => {
        const repo = new ComponentsRepository(trx);
        const row = await repo.find(accountId, envId, componentId);
        if (!row) throw notFound('Component', componentId, 'List components with GET /components.');
        const refs = await repo.refs(accountId, envId, [componentId]);
        if (refs.length > 0) throw stillReferenced(componentId, refs);
        await repo.delete(accountId, envId, componentId);
      });
    } catch (err) {
      if (isForeignKeyViolation(err)) throw stillReferenced(componentId, await this.repo.refs(accountId, envId, [componentId]));
      throw err;
    }
  }
}

function stillReferenced(componentId: string, refs: ComponentRefRow[]): AppError {
  const names = refs.map((r) => `${r.notification_id}/${r.channel}/${r.template_id}`);
  return new AppError(
    'CONFLICT',
    `Component "${componentId}" is used by ${names.length} template${names.length === 1 ? '' : 's'}: ${names.join(', ')}.`,
    `Remove {% component '${componentId}' %} from those templates (PATCH /notifications/{notificationId}/{channel}/templates/{templateId}) or delete them, then delete the component.`,
  );
}

function checkHtml(renderer: LiquidRenderer, html: string): void {
  try {
    const { componentIds } = renderer.check(html, { html: true, field: 'html' });
    if (componentIds.length > 0) {
      throw invalid('A component cannot include another component.', `Remove the {% component '${componentIds[0]}' %} tag from this component's html.`);
    }
  } catch (err) {
    if (err instanceof TemplateRenderError) {
      throw invalid(`Invalid Liquid in ${err.message}`, 'Fix the merge-tag syntax: {{ name }}, {% if %}...{% endif %}; filters must exist.');
    }
    throw err;
  }
}

function toComponent(row: ComponentRow, refs: ComponentRefRow[]): Component {
  return {
    envId: row.env_id,
    componentId: row.component_id,
    name: row.name,
    internal: row.internal,
    internalPage: row.internal_page,
    html: row.html,
    createdAt: row.created_at,
    modifiedAt: row.updated_at,
    referencedBy: refs
      .filter((r) => r.component_id === row.component_id)
      .map((r) => ({ notificationId: r.notification_id, channel: r.channel as Channel, templateId: r.template_id })),
    channel: 'EMAIL',
  };
}

function parseOrKeep(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

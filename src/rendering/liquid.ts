import { type Context, type Emitter, Liquid, Tag, type TagToken, type Template, type TopLevelToken } from 'liquidjs';

/**
 * Liquid merge tags for every channel. One engine per escaping mode (LiquidJS applies
 * `outputEscape` when it parses an output, so escaped and plain templates are different parses).
 * Safe on untrusted input: no file system (include/render/layout are refused), parse size,
 * render time, render node count, memory and output size limits, and unknown filters fail.
 */

export class TemplateRenderError extends Error {
  readonly code = 'TEMPLATE_RENDER_FAILED' as const;
  constructor(
    message: string,
    /** The content field that failed, e.g. "subject" or "blocks[0].text.text". */
    readonly field?: string,
  ) {
    super(field ? `${field}: ${message}` : message);
    this.name = 'TemplateRenderError';
  }
}

export interface RenderLimits {
  /** Characters of template source per parse. */
  parseLimit: number;
  /** Milliseconds per render call: what stops a runaway loop. */
  renderLimit: number;
  /** LiquidJS allocation units per render call (ranges, string and array filters). */
  memoryLimit: number;
  /** Characters of rendered output. */
  maxOutputChars: number;
}

export const DEFAULT_LIMITS: RenderLimits = {
  parseLimit: 2_000_000,
  renderLimit: 2_000,
  memoryLimit: 20_000_000,
  maxOutputChars: 2_000_000,
};

/** Merge-tag scope: the send's parameters plus the recipient under `user`. */
export type RenderContext = Record<string, unknown>;

export function buildRenderContext(parameters: Record<string, unknown> | undefined, user: Record<string, unknown> | undefined): RenderContext {
  return { ...(parameters ?? {}), user: user ?? {} };
}

/** Looks up email components by id; ids missing from the answer are reported as unknown. */
export type ComponentResolver = (componentIds: string[]) => Promise<Map<string, string> | Record<string, string>>;

/** Syntax of a component reference inside email html. */
export const COMPONENT_TAG_EXAMPLE = "{% component 'componentId' %}";
const COMPONENT_ARG = /^\s*(['"])([A-Za-z0-9_.:-]{1,100})\1\s*$/;
const COMPONENTS = Symbol('clarion.components');

interface Parsed {
  templates: Template[];
  componentIds: string[];
}

type Mode = 'text' | 'html';

export class LiquidRenderer {
  private readonly engines: Record<Mode, Liquid>;
  private readonly cache = new Map<string, Parsed>();
  private readonly cacheSize = 500;
  /** Set while a parse runs (parsing is synchronous), so the component tag can report its ids. */
  private collecting: string[] | null = null;

  constructor(readonly limits: RenderLimits = DEFAULT_LIMITS) {
    this.engines = { text: this.createEngine('text'), html: this.createEngine('html') };
  }

  /** Parses without rendering; throws TemplateRenderError. Returns the components an html source uses. */
  check(source: string, options: { html?: boolean; field?: string } = {}): { componentIds: string[] } {
    const parsed = this.parse(source, options.html ? 'html' : 'text', options.field);
    return { componentIds: [...parsed.componentIds] };
  }

  /** Renders plain text (subject, SMS, push, Slack, ...): values are not escaped. */
  async renderText(source: string, context: RenderContext, field?: string): Promise<string> {
    if (!source.includes('{')) return source;
    const parsed = this.parse(source, 'text', field);
    return this.render(this.engines.text, parsed.templates, context, {}, field);
  }

  /**
   * Renders email html: output values are HTML-escaped (use `| raw` to opt out) and
   * `{% component 'id' %}` tags are replaced by the component's html, rendered in the same scope.
   */
  async renderEmailHtml(source: string, context: RenderContext, resolveComponents?: ComponentResolver, field = 'html'): Promise<string> {
    const parsed = this.parse(source, 'html', field);
    const components = new Map<string, Parsed>();
    if (parsed.componentIds.length > 0) {
      if (!resolveComponents) throw new TemplateRenderError(`uses components (${parsed.componentIds.join(', ')}) but no component source was given`, field);
      const found = await resolveComponents(parsed.componentIds);
      const lookup = found instanceof Map ? found : new Map(Object.entries(found));
      for (const id of parsed.componentIds) {
        const html = lookup.get(id);
        if (html === undefined) throw new TemplateRenderError(`component '${id}' does not exist in this environment`, field);
        const inner = this.parse(html, 'html', `component '${id}'`);
        if (inner.componentIds.length > 0) throw new TemplateRenderError(`component '${id}' includes another component; components cannot be nested`, field);
        components.set(id, inner);
      }
    }
    return this.render(this.engines.html, parsed.templates, context, { [COMPONENTS]: components }, field);
  }

  private async render(engine: Liquid, templates: Template[], context: RenderContext, globals: object, field?: string): Promise<string> {
    let text: string;
    try {
      // A string: liquidjs keeps an output's own type only with keepOutputType, which is not set.
      text = (await engine.render(templates, context, {
        globals,
        renderLimit: this.limits.renderLimit,
        memoryLimit: this.limits.memoryLimit,
      })) as string;
    } catch (err) {
      throw new TemplateRenderError(describe(err), field);
    }
    if (text.length > this.limits.maxOutputChars) {
      throw new TemplateRenderError(`rendered output is ${text.length} characters, over the limit of ${this.limits.maxOutputChars}`, field);
    }
    return text;
  }

  private parse(source: string, mode: Mode, field?: string): Parsed {
    const key = `${mode}\u0000${source}`;
    const hit = this.cache.get(key);
    if (hit) {
      // Re-insert so the map's insertion order approximates least-recently-used.
      this.cache.delete(key);
      this.cache.set(key, hit);
      return hit;
    }
    const ids: string[] = [];
    this.collecting = ids;
    let templates: Template[];
    try {
      templates = this.engines[mode].parse(source);
    } catch (err) {
      throw new TemplateRenderError(describe(err), field);
    } finally {
      this.collecting = null;
    }
    const parsed: Parsed = { templates, componentIds: [...new Set(ids)] };
    this.cache.set(key, parsed);
    if (this.cache.size > this.cacheSize) this.cache.delete(this.cache.keys().next().value as string);
    return parsed;
  }

  private createEngine(mode: Mode): Liquid {
    const engine = new Liquid({
      strictFilters: true,
      strictVariables: false,
      ownPropertyOnly: true,
      // An in-memory, empty template map: nothing is ever read from disk.
      templates: {},
      parseLimit: this.limits.parseLimit,
      renderLimit: this.limits.renderLimit,
      memoryLimit: this.limits.memoryLimit,
      ...(mode === 'html' ? { outputEscape: 'escape' as const } : {}),
    });
    for (const name of ['include', 'render', 'layout']) engine.registerTag(name, disabledTag(name));
    if (mode === 'html') engine.registerTag('component', this.componentTag());
    return engine;
  }

  private componentTag() {
    const collect = (componentId: string) => this.collecting?.push(componentId);
    return class ComponentTag extends Tag {
      private readonly componentId: string;
      constructor(token: TagToken, remainTokens: TopLevelToken[], liquid: Liquid) {
        super(token, remainTokens, liquid);
        const match = COMPONENT_ARG.exec(token.args);
        if (!match) throw new Error(`component tag takes one quoted component id, as in ${COMPONENT_TAG_EXAMPLE}`);
        this.componentId = match[2];
        collect(this.componentId);
      }
      *render(ctx: Context, emitter: Emitter): Generator<unknown, void, unknown> {
        const components = (ctx.globals as Record<symbol, Map<string, Parsed> | undefined>)[COMPONENTS];
        const component = components?.get(this.componentId);
        if (!component) throw new Error(`component '${this.componentId}' was not resolved`);
        yield this.liquid.renderer.renderTemplates(component.templates, ctx, emitter);
      }
    };
  }
}

function disabledTag(name: string) {
  return class DisabledTag extends Tag {
    constructor(token: TagToken, remainTokens: TopLevelToken[], liquid: Liquid) {
      super(token, remainTokens, liquid);
      throw new Error(`{% ${name} %} is not available (templates cannot load files); in email html use ${COMPONENT_TAG_EXAMPLE}`);
    }
    render(): void {}
  };
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    // LiquidJS appends a source excerpt on following lines; the first line carries the cause and position.
    return err.message.split('\n')[0];
  }
  return String(err);
}

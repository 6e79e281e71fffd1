import type { Channel } from '../http/schemas.js';
import { type ComponentResolver, type LiquidRenderer, type RenderContext, TemplateRenderError } from './liquid.js';

/** Fields that are never rendered nor sent: the editor's own representation of an email. */
const NOT_RENDERED = new Set(['internal']);

export interface RenderContentOptions {
  /** The caller's renderer (its parse cache is the caller's: one per render thread). */
  renderer: LiquidRenderer;
  resolveComponents?: ComponentResolver;
}

/**
 * Renders every string of a channel content object (template content or inline content), deeply:
 * nested objects such as in-app `instant`/`batch` and Slack `blocks` included. Email `html` is
 * rendered with HTML escaping and components; every other string is plain text. Non-string
 * values (booleans, numbers) are kept; `internal` is dropped. Throws TemplateRenderError naming
 * the field that failed.
 */
export async function renderChannelContent<T extends object>(
  channel: Channel,
  content: T,
  context: RenderContext,
  options: RenderContentOptions,
): Promise<T> {
  const { renderer } = options;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(content)) {
    if (NOT_RENDERED.has(key) || value === undefined) continue;
    if (channel === 'EMAIL' && key === 'html' && typeof value === 'string') {
      out[key] = await renderer.renderEmailHtml(value, context, options.resolveComponents, key);
    } else {
      out[key] = await renderDeep(renderer, value, context, key, 0);
    }
  }
  return out as T;
}

const MAX_DEPTH = 20;

async function renderDeep(renderer: LiquidRenderer, value: unknown, context: RenderContext, path: string, depth: number): Promise<unknown> {
  if (depth > MAX_DEPTH) throw new TemplateRenderError(`nested deeper than ${MAX_DEPTH} levels`, path);
  if (typeof value === 'string') return renderer.renderText(value, context, path);
  if (Array.isArray(value)) {
    const items: unknown[] = [];
    for (let i = 0; i < value.length; i++) items.push(await renderDeep(renderer, value[i], context, `${path}[${i}]`, depth + 1));
    return items;
  }
  if (value !== null && typeof value === 'object') {
    const obj: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) obj[k] = await renderDeep(renderer, v, context, `${path}.${k}`, depth + 1);
    return obj;
  }
  return value;
}

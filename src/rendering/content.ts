import type { Channel } from '../http/schemas.js';
import { type ComponentResolver, DEFAULT_LIMITS, type LiquidRenderer, type RenderContext, type RenderLimits, TemplateRenderError } from './liquid.js';

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

/**
 * What renderChannelContent returns for content in which no string has a `{` (so no Liquid
 * output or tag to run), worked out without a parse: the same strings, `internal` dropped. Null
 * when some string may be a template, or when the content is past a limit that the render would
 * report (the caller then renders it the usual way, and gets that error).
 */
export function contentWithoutTemplates<T extends object>(channel: Channel, content: T, limits: RenderLimits = DEFAULT_LIMITS): T | null {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(content)) {
    if (NOT_RENDERED.has(key) || value === undefined) continue;
    if (channel === 'EMAIL' && key === 'html' && typeof value === 'string') {
      // Email html is always parsed, so the parse and output limits apply to it even without tags.
      if (value.includes('{') || value.length > Math.min(limits.parseLimit, limits.maxOutputChars)) return null;
      out[key] = value;
      continue;
    }
    const copy = copyWithoutTemplates(value, 0);
    if (copy === NOT_PLAIN) return null;
    out[key] = copy;
  }
  return out as T;
}

const NOT_PLAIN = Symbol('not plain');

function copyWithoutTemplates(value: unknown, depth: number): unknown {
  if (depth > MAX_DEPTH) return NOT_PLAIN;
  if (typeof value === 'string') return value.includes('{') ? NOT_PLAIN : value;
  if (Array.isArray(value)) {
    const items: unknown[] = [];
    for (const item of value) {
      const copy = copyWithoutTemplates(item, depth + 1);
      if (copy === NOT_PLAIN) return NOT_PLAIN;
      items.push(copy);
    }
    return items;
  }
  if (value !== null && typeof value === 'object') {
    const obj: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const copy = copyWithoutTemplates(v, depth + 1);
      if (copy === NOT_PLAIN) return NOT_PLAIN;
      obj[k] = copy;
    }
    return obj;
  }
  return typeof value === 'function' || typeof value === 'symbol' ? NOT_PLAIN : value;
}

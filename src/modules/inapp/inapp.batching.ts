import { type LiquidRenderer, type RenderLimits, TemplateRenderError } from '../../rendering/liquid.js';
import type { InappOptions } from '../types/delivery-options.js';
import { batchingKeyValue } from './batching-key.js';

/**
 * In-app batching (issue 13, item 4): with `options.INAPP_WEB.instant.batching` on, the sends of
 * a type to one user whose batchingKey has the same value, within `batchingWindow` ms of the
 * send that opened the batch, are shown as one in-app notification, updated in place. Its id is
 * the trackingId of that first send. With one send it shows that send's content; from the second
 * on, the in-app template's `batch` copy (title, redirectURL, imageURL) rendered with the latest
 * send's parameters plus `_items` (the parameters of the batch's latest MAX_BATCH_ITEMS sends,
 * oldest first) and `_count` (every send of the batch).
 */

/** Items kept for `_items` and the notification's `parameters._items`: the latest ones. */
export const MAX_BATCH_ITEMS = 50;

/**
 * Limits of the batch template render. It runs inside the transaction that counts the send into
 * its batch (so title and count always agree) on the worker's own thread, not a render thread:
 * its copy is three short strings, and these limits bound what a hostile one can cost.
 */
export const BATCH_RENDER_LIMITS: RenderLimits = { parseLimit: 20_000, renderLimit: 100, memoryLimit: 1_000_000, maxOutputChars: 10_000 };

/** The batch copy of an in-app template (spec: Template `batch`), unrendered. */
export interface BatchTemplate {
  title?: string;
  redirectURL?: string;
  imageURL?: string;
}

/** What planning decides for a send's in-app delivery when its type batches; stored in the delivery's content. */
export interface InappBatchPlan {
  /** The batchingKey's value for this send ('' when the send has none). */
  key: string;
  windowMs: number;
  template?: BatchTemplate;
  /** The recipient's BATCH_USER_FIELDS, for `{{ user.* }}` in the batch template. */
  user?: Record<string, unknown>;
}

/**
 * What of the recipient the batch template sees, stored with the delivery: not their tokens
 * (a Slack token is a secret, push tokens are credentials of a kind), only what a copy shows.
 */
export const BATCH_USER_FIELDS = ['id', 'email', 'number', 'timezone', 'properties'] as const;

/** The shown copy of an in-app notification. */
export interface InappCopy {
  title: string;
  redirectURL?: string;
  imageURL?: string;
}

/** The type's batching settings when batching is on. */
export function batchingOf(options: InappOptions | undefined): { batchingKey?: string; windowMs: number } | null {
  const instant = options?.instant;
  if (!instant?.batching || instant.batchingWindow === undefined) return null;
  return { ...(instant.batchingKey !== undefined ? { batchingKey: instant.batchingKey } : {}), windowMs: instant.batchingWindow };
}

/**
 * The batch plan of one send: the key's value is read from the notification the send would be
 * alone (`{notificationId, subNotificationId, title, redirectURL, imageURL, parameters}`), as
 * the React client reads it.
 */
export function planBatch(
  settings: { batchingKey?: string; windowMs: number },
  notification: Record<string, unknown>,
  source: { template?: unknown; user?: Record<string, unknown> },
): InappBatchPlan {
  const template = isBatchTemplate(source.template) ? source.template : undefined;
  return {
    key: batchingKeyValue(settings.batchingKey, notification),
    windowMs: settings.windowMs,
    ...(template ? { template } : {}),
    ...(source.user ? { user: Object.fromEntries(BATCH_USER_FIELDS.filter((f) => source.user![f] !== undefined).map((f) => [f, source.user![f]])) } : {}),
  };
}

/** A stored delivery content's batch plan, if it has one. */
export function batchPlanOf(content: Record<string, unknown>): InappBatchPlan | undefined {
  const plan = content.batching as InappBatchPlan | undefined;
  return plan && typeof plan === 'object' && typeof plan.key === 'string' && typeof plan.windowMs === 'number' ? plan : undefined;
}

/**
 * The batch copy rendered over the batch; the latest send's own copy when the template has no
 * batch copy or it fails to render (then `error` says why, for the send's log).
 */
export async function renderBatchCopy(
  renderer: LiquidRenderer,
  plan: InappBatchPlan,
  latest: InappCopy,
  batch: { parameters: Record<string, unknown>; items: Record<string, unknown>[]; count: number },
): Promise<{ copy: InappCopy; error?: string }> {
  const template = plan.template;
  if (!template?.title) return { copy: latest };
  const context = { ...batch.parameters, user: plan.user ?? {}, _items: batch.items, _count: batch.count };
  try {
    const copy: InappCopy = { title: await renderer.renderText(template.title, context, 'batch.title') };
    for (const field of ['redirectURL', 'imageURL'] as const) {
      const source = template[field];
      const value = source === undefined ? undefined : await renderer.renderText(source, context, `batch.${field}`);
      if (value) copy[field] = value;
    }
    return { copy };
  } catch (err) {
    if (!(err instanceof TemplateRenderError)) throw err;
    return { copy: latest, error: err.message };
  }
}

function isBatchTemplate(value: unknown): value is BatchTemplate {
  if (value === null || typeof value !== 'object') return false;
  return Object.values(value).every((v) => v === undefined || typeof v === 'string');
}

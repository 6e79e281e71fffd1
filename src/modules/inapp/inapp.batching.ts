import { type RenderContext, type RenderLimits, TemplateRenderError } from '../../rendering/liquid.js';
import type { RenderPool } from '../../rendering/render-pool.js';
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
 * JSON characters of `_items` beyond the latest send's: older items are left out from the first
 * that would pass it. Without it, 50 sends of 20 MB parameters made every later send of the batch
 * read and write a gigabyte (the API stalls, then the process runs out of memory).
 */
export const MAX_BATCH_ITEMS_CHARS = 256 * 1024;

/**
 * Limits of the batch template render: its copy is three short strings. It runs on a render
 * thread (RenderPool) after the send is counted into its batch, never on the event loop: one
 * LiquidJS filter over a large parameter runs unchecked by these limits (seconds, with a 1 MB
 * parameter), and only a thread the pool can terminate bounds that.
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
 * Renders the batch copy's strings with `context` (on a render thread), in the turn of `tenant`
 * (the account) among the renders waiting for a thread; rejects with TemplateRenderError.
 */
export type BatchCopyRenderer = (template: BatchTemplate, context: RenderContext, tenant?: string) => Promise<BatchTemplate>;

/** The batch copy rendered on `renders`' threads with BATCH_RENDER_LIMITS. */
export function batchCopyRenderer(renders: Pick<RenderPool, 'render'>): BatchCopyRenderer {
  // Rendered as `batch` so that an error names the field as the template has it (`batch.title`).
  return async (template, context, tenant) => (await renders.render('INAPP_WEB', { batch: template }, context, { limits: BATCH_RENDER_LIMITS, tenant })).batch;
}

/** What a send that joined a batch leaves to render once it is committed (InappService.writeBatchCopy). */
export interface PendingBatchCopy {
  batchId: string;
  /** The send's place in the batch: the copy is written only while no later send has joined. */
  count: number;
  notificationId: string;
  plan: InappBatchPlan;
  /** The send's own copy: shown when the batch copy fails. */
  latest: InappCopy;
  parameters: Record<string, unknown>;
  items: Record<string, unknown>[];
}

/**
 * The batch copy rendered over the batch; the latest send's own copy when the template has no
 * batch copy or it fails to render (then `error` says why).
 */
export async function renderBatchCopy(
  render: BatchCopyRenderer,
  plan: InappBatchPlan,
  latest: InappCopy,
  batch: { parameters: Record<string, unknown>; items: Record<string, unknown>[]; count: number },
): Promise<{ copy: InappCopy; error?: string }> {
  const template = plan.template;
  if (!template?.title) return { copy: latest };
  const context = { ...batch.parameters, user: plan.user ?? {}, _items: batch.items, _count: batch.count };
  const source: BatchTemplate = { title: template.title };
  for (const field of ['redirectURL', 'imageURL'] as const) if (template[field] !== undefined) source[field] = template[field];
  try {
    const rendered = await render(source, context);
    const copy: InappCopy = { title: rendered.title ?? '' };
    for (const field of ['redirectURL', 'imageURL'] as const) if (rendered[field]) copy[field] = rendered[field];
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

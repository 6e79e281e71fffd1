import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { InappBatchesRepository } from './inapp-batches.repository.js';
import { type BatchCopyRenderer, type InappBatchPlan, MAX_BATCH_ITEMS, MAX_BATCH_ITEMS_CHARS, type PendingBatchCopy, renderBatchCopy } from './inapp.batching.js';
import {
  type InappDeliveryOptions,
  type InappNotification,
  type InappReply,
  STATUS_FIELDS,
  parseInstant,
  parseStatusValue,
  toInappNotification,
} from './inapp.model.js';
import type { InappRealtime } from './inapp.realtime.js';
import { type AnyKysely, InappRepository, type InappRow, type InappRowPatch, type InappScope, inappKey } from './inapp.repository.js';

export type { InappNotification, InappReply, InappScope };

/** What the delivery pipeline hands over for one recipient of one message. */
export interface StoreInappInput extends InappScope {
  /** The message's trackingId: the notification id clients see, and the idempotency key. */
  trackingId: string;
  /** The notification type. */
  notificationId: string;
  subNotificationId?: string;
  title: string;
  redirectURL?: string;
  imageURL?: string;
  parameters?: Record<string, unknown>;
  deliveryOptions?: InappDeliveryOptions;
  template?: Record<string, unknown>;
  /** Defaults to now. */
  date?: string;
  /** After it the notification is no longer listed or counted. */
  expDate?: string;
}

export interface StoreInappResult {
  notification: InappNotification;
  /** False when this (envId, userId, trackingId) was already stored: a retried delivery. */
  created: boolean;
}

/** Where a batched send went (see inapp.batching.ts). */
export interface StoreBatchedResult {
  /** The id of the in-app notification the batch is shown as. */
  batchId: string;
  /** How many sends the batch held once this one joined (1: it opened the batch). */
  count: number;
  /** False when this send had already joined its batch: a retried delivery, nothing changed. */
  joined: boolean;
  /** The batch copy to render and write once the transaction commits (writeBatchCopy). */
  pendingCopy?: PendingBatchCopy;
}

/** Body of PATCH /user/inapp. Status values: timestamp, true (now), false/null (clear). */
export interface InappStatusPatch {
  trackingIds: string[];
  opened?: unknown;
  clicked?: unknown;
  archived?: unknown;
  actioned1?: unknown;
  actioned2?: unknown;
  /** Replies to append; `date` as the client sent it (ISO text or epoch, parseInstant reads it). */
  reply?: InappReplyInput;
  replies?: InappReplyInput[];
}

type InappReplyInput = Omit<InappReply, 'date'> & { date: string | number };

export const DEFAULT_PAGE_SIZE = 10;
export const MAX_PAGE_SIZE = 1000;
/** Replies live in one JSON value per notification, written by end users: both bounds keep it small (~210 KB at most). */
export const MAX_REPLIES_PER_NOTIFICATION = 50;
export const MAX_REPLY_BYTES = 4096;

/** A conflict with the stored state, not a malformed request: the same body fits a notification with fewer replies. */
const tooManyReplies = (trackingId: string, existing: number) =>
  new AppError(
    'CONFLICT',
    `Notification "${trackingId}" has ${existing} replies; at most ${MAX_REPLIES_PER_NOTIFICATION} are kept per notification. Nothing was changed.`,
    'Reply on another notification, or send fewer replies.',
  );

/** The row store() writes for `input`; throws a VALIDATION_FAILED error for a malformed one. */
function rowOf(input: StoreInappInput, now: string): InappRow {
  for (const field of ['accountId', 'envId', 'userId', 'trackingId', 'notificationId'] as const) {
    if (typeof input[field] !== 'string' || input[field] === '') throw invalid(`In-app notification needs a non-empty ${field}.`);
  }
  if (typeof input.title !== 'string') throw invalid('In-app notification needs a title.');
  return {
    account_id: input.accountId,
    env_id: input.envId,
    user_id: input.userId,
    tracking_id: input.trackingId,
    notification_id: input.notificationId,
    sub_notification_id: input.subNotificationId ?? null,
    title: input.title,
    redirect_url: input.redirectURL ?? null,
    image_url: input.imageURL ?? null,
    delivery_options: input.deliveryOptions ? JSON.stringify(input.deliveryOptions) : null,
    template: input.template ? JSON.stringify(input.template) : null,
    parameters: input.parameters ? JSON.stringify(input.parameters) : null,
    date: parseInstant(input.date, 'date') ?? now,
    seen: 0,
    opened: null,
    clicked: null,
    archived: null,
    actioned1: null,
    actioned2: null,
    replies: '[]',
    exp_date: parseInstant(input.expDate, 'expDate') ?? null,
    created_at: now,
    updated_at: now,
  };
}

export class InappService {
  private readonly repo: InappRepository;
  private readonly realtime: InappRealtime;

  constructor(private readonly deps: Deps) {
    this.repo = new InappRepository(deps.db);
    this.realtime = deps.inappRealtime;
  }

  /**
   * Stores one in-app notification with `db` (the caller's transaction, or any Kysely). Idempotent
   * per (envId, userId, trackingId): a second call returns the stored one with `created: false`.
   * Call `publish` after the transaction commits.
   */
  async store(db: AnyKysely, input: StoreInappInput): Promise<StoreInappResult> {
    const [result] = await this.storeMany(db, [input]);
    return result;
  }

  /**
   * store() for many notifications: one INSERT for all of them (the delivery worker's batch of
   * in-app sends), answered in the order of `inputs`. Nothing is written when any input is invalid.
   */
  async storeMany(db: AnyKysely, inputs: StoreInappInput[]): Promise<StoreInappResult[]> {
    const now = this.deps.clock.now().toISOString();
    const rows = inputs.map((input) => rowOf(input, now));
    const repo = new InappRepository(db);
    const created = await repo.insertManyIfAbsent(rows);
    const results: StoreInappResult[] = [];
    for (const [i, row] of rows.entries()) {
      // A key given twice is created by its first input; the second finds it as a retry would.
      if (created.delete(inappKey(row))) {
        results.push({ notification: toInappNotification(row), created: true });
        continue;
      }
      const existing = await repo.find(inputs[i], row.tracking_id);
      if (!existing) throw new Error(`in-app notification ${row.tracking_id} conflicted but is not readable`);
      results.push({ notification: toInappNotification(existing), created: false });
    }
    return results;
  }

  /**
   * Counts one send into its batch with `db` (the caller's transaction; see inapp.batching.ts):
   * opens the batch's notification or updates it in place (`_count` and `_items` in its
   * parameters, unseen, unarchived, dated now). Idempotent per send. The batch copy is not
   * rendered here, inside a write transaction: from the second send on, a batch with a batch copy
   * keeps its current copy and the result's `pendingCopy` is for writeBatchCopy after the commit;
   * without one, the latest send's own copy is written now. Call `publishChanged` with the batch
   * id after the transaction commits (and after writeBatchCopy).
   */
  async storeBatched(db: AnyKysely, input: StoreInappInput & { batch: InappBatchPlan }): Promise<StoreBatchedResult> {
    const batches = new InappBatchesRepository(db);
    const earlier = await batches.findItem(input, input.trackingId);
    if (earlier) return { batchId: earlier.batch_id, count: earlier.seq, joined: false };
    const now = this.deps.clock.now();
    const at = now.toISOString();
    const { batchId, count } = await batches.join({
      ...input,
      batchKey: input.batch.key,
      now: at,
      closesAt: new Date(now.getTime() + input.batch.windowMs).toISOString(),
    });
    const parameters = input.parameters ?? {};
    await batches.insertItem({ env_id: input.envId, user_id: input.userId, tracking_id: input.trackingId, account_id: input.accountId, batch_id: batchId, seq: count, parameters: JSON.stringify(parameters), created_at: at });
    const items = count === 1 ? [parameters] : (await batches.latestItems(input, batchId, MAX_BATCH_ITEMS, MAX_BATCH_ITEMS_CHARS)).map((row) => JSON.parse(row.parameters) as Record<string, unknown>);
    const latest = { title: input.title, redirectURL: input.redirectURL, imageURL: input.imageURL };
    const rendersLater = count > 1 && Boolean(input.batch.template?.title);
    const shown = { ...parameters, _count: count, _items: items };
    const ownCopy = { title: latest.title, redirect_url: latest.redirectURL ?? null, image_url: latest.imageURL ?? null };
    const repo = new InappRepository(db);
    const updated =
      count === 1
        ? 0
        : await repo.update(input, [batchId], {
            ...(rendersLater ? {} : ownCopy),
            parameters: JSON.stringify(shown),
            date: at,
            seen: 0,
            opened: null,
            archived: null,
            updated_at: at,
          });
    // The batch's notification is new, or was removed while its batch was open: (re)created, with
    // the send's own copy until the batch copy is written.
    if (updated === 0) {
      await this.store(db, { ...input, trackingId: batchId, parameters: shown, date: at });
    }
    const pendingCopy: PendingBatchCopy | undefined = rendersLater
      ? { batchId, count, notificationId: input.notificationId, plan: input.batch, latest, parameters, items }
      : undefined;
    return { batchId, count, joined: true, ...(pendingCopy ? { pendingCopy } : {}) };
  }

  /**
   * Renders a committed send's batch copy with `render` (a render thread) and writes it to the
   * batch's notification, unless a later send has joined the batch meanwhile (its own copy
   * counts more sends). Should the copy fail to render, the send's own copy is written and the
   * reason logged. A process stopped before this leaves the batch's previous copy until the next send.
   */
  async writeBatchCopy(scope: InappScope, pending: PendingBatchCopy, render: BatchCopyRenderer): Promise<{ written: boolean; error?: string }> {
    // In the account's turn at the render threads: another tenant's waiting renders do not hold it.
    const { copy, error } = await renderBatchCopy((template, context) => render(template, context, scope.accountId), pending.plan, pending.latest, pending);
    if (error) this.deps.logger.warn({ batchId: pending.batchId, batchCount: pending.count, error }, "in-app batch copy could not be rendered; the latest send's own copy is shown");
    const written = await this.transaction(async (trx) => {
      const current = await new InappBatchesRepository(trx).lockCurrent(scope, pending.notificationId, pending.plan.key, this.deps.storage.dialect === 'postgres');
      if (current?.batch_id !== pending.batchId || current.count !== pending.count) return false;
      const at = this.deps.clock.now().toISOString();
      const patch = { title: copy.title, redirect_url: copy.redirectURL ?? null, image_url: copy.imageURL ?? null, updated_at: at };
      return (await new InappRepository(trx).update(scope, [pending.batchId], patch)) > 0;
    });
    return { written, ...(error ? { error } : {}) };
  }

  /**
   * Pushes the notifications `ids` as stored when the push goes out (not as a caller saw them),
   * so the last push a socket gets for an updated batch shows its latest state whatever order
   * the updates committed in.
   */
  publishChanged(scope: InappScope, ids: string[]): Promise<void> {
    return this.realtime.publishStored(scope, ids);
  }

  /** Pushes `{route: 'inapp_web/new_notifications', payload: {notifications}}` to the user's open sockets, in every process. */
  publish(scope: InappScope, notifications: InappNotification[]): Promise<void> {
    return this.realtime.publish(scope, notifications);
  }

  /** Runs `work` in a transaction of the service's database (storeBatched outside a caller's transaction). */
  transaction<T>(work: (trx: AnyKysely) => Promise<T>): Promise<T> {
    return this.deps.db.transaction().execute(work);
  }

  /** store() on the service's own database, then publish() when it was new. */
  async deliver(input: StoreInappInput): Promise<StoreInappResult> {
    const result = await this.store(this.deps.db, input);
    if (result.created) await this.publish(input, [result.notification]);
    return result;
  }

  async list(scope: InappScope, options: { before?: unknown; count?: number } = {}): Promise<InappNotification[]> {
    const count = options.count ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(count) || count < 1 || count > MAX_PAGE_SIZE) throw invalid(`"count" must be an integer from 1 to ${MAX_PAGE_SIZE}.`);
    const rows = await this.repo.list(scope, {
      before: parseInstant(options.before, 'before'),
      count,
      now: this.deps.clock.now().toISOString(),
    });
    return rows.map(toInappNotification);
  }

  unreadCount(scope: InappScope): Promise<number> {
    return this.repo.countUnseen(scope, this.deps.clock.now().toISOString());
  }

  /** Sets or clears statuses and appends replies on the user's notifications among `trackingIds`; others are ignored. */
  async update(scope: InappScope, patch: InappStatusPatch): Promise<number> {
    const now = this.deps.clock.now();
    const set: InappRowPatch = {};
    for (const field of STATUS_FIELDS) {
      const value = parseStatusValue(patch[field], field, now);
      if (value !== undefined) set[field] = value;
    }
    const replies = [...(patch.reply ? [patch.reply] : []), ...(patch.replies ?? [])].map((reply) => ({
      date: parseInstant(reply.date, 'reply.date') ?? now.toISOString(),
      message: reply.message,
    }));
    if (replies.length > MAX_REPLIES_PER_NOTIFICATION) {
      throw invalid(`At most ${MAX_REPLIES_PER_NOTIFICATION} replies per notification; this request has ${replies.length}.`);
    }
    for (const reply of replies) {
      const bytes = Buffer.byteLength(reply.message);
      if (bytes > MAX_REPLY_BYTES) throw invalid(`A reply message is at most ${MAX_REPLY_BYTES} bytes (UTF-8); got ${bytes}.`, 'Shorten the reply.');
    }
    const ids = [...new Set(patch.trackingIds)];
    const updatedAt = now.toISOString();
    return this.deps.db.transaction().execute(async (trx) => {
      const repo = new InappRepository(trx);
      const matched = await repo.repliesForUpdate(scope, ids, this.deps.storage.dialect === 'postgres');
      if (Object.keys(set).length > 0) await repo.update(scope, ids, { ...set, updated_at: updatedAt });
      if (replies.length > 0) {
        for (const row of matched) {
          const list = [...(JSON.parse(row.replies) as InappReply[]), ...replies];
          // Throwing rolls back the whole PATCH (statuses and other notifications' replies included).
          if (list.length > MAX_REPLIES_PER_NOTIFICATION) throw tooManyReplies(row.tracking_id, list.length - replies.length);
          await repo.setReplies(scope, row.tracking_id, JSON.stringify(list), updatedAt);
        }
      }
      return matched.length;
    });
  }

  /** Marks the user's notifications seen: all of them, or those of one trackingId / notification type. */
  markSeen(scope: InappScope, filter: { trackingIds?: string[]; notificationId?: string } = {}): Promise<number> {
    return this.repo.markSeen(scope, filter, this.deps.clock.now().toISOString());
  }
}

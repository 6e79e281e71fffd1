import type { Kysely } from 'kysely';
import { type InappBatchPlan, batchCopyRenderer, batchPlanOf, batchingOf, planBatch } from '../../inapp/inapp.batching.js';
import type { InappService, StoreBatchedResult, StoreInappInput } from '../../inapp/inapp.service.js';
import type { RenderPool } from '../../../rendering/render-pool.js';
import type { CoreTables } from '../../../storage/schema.js';
import { parametersOf } from '../sending.schemas.js';
import { type ChannelExecutor, type DeliverInput, type DeliverOutcome, type InTransactionOutcome, str } from './types.js';

function storeInput({ message, content, body }: DeliverInput): StoreInappInput {
  return {
    accountId: message.account_id,
    envId: message.env_id,
    userId: message.user_id,
    trackingId: message.tracking_id,
    notificationId: message.notification_id,
    ...(message.sub_notification_id ? { subNotificationId: message.sub_notification_id } : {}),
    title: str(content.title) ?? '',
    ...(str(content.redirectURL) ? { redirectURL: str(content.redirectURL) } : {}),
    ...(str(content.imageURL) ? { imageURL: str(content.imageURL) } : {}),
    parameters: parametersOf(body),
  };
}

/** The send's log says which batched notification it went into (`inapp_batch_id`) and its place in it. */
function batchedOutcome(stored: StoreBatchedResult): DeliverOutcome {
  return {
    result: { providerMessageId: stored.batchId },
    delivered: true,
    extra: {
      inapp_batch_id: stored.batchId,
      inapp_batch_count: stored.count,
    },
  };
}

/** `renders`: the render threads the batch copy is rendered on (never the event loop: see BATCH_RENDER_LIMITS). */
export function inappExecutor(inapp: InappService, renders: Pick<RenderPool, 'render'>): ChannelExecutor {
  const renderBatch = batchCopyRenderer(renders);

  /**
   * A batched send, inside `trx`. Once that commits: its batch copy is rendered and written, then
   * the batch's notification is pushed (the push goes out even when the copy could not be written).
   */
  async function deliverBatched(trx: Kysely<CoreTables>, input: DeliverInput, batch: InappBatchPlan) {
    const scope = storeInput(input);
    const stored = await inapp.storeBatched(trx, { ...scope, batch });
    const { pendingCopy } = stored;
    const afterCommit = async () => {
      try {
        if (pendingCopy) await inapp.writeBatchCopy(scope, pendingCopy, renderBatch);
      } finally {
        await inapp.publishChanged(scope, [stored.batchId]);
      }
    };
    return { ...batchedOutcome(stored), ...(stored.joined ? { afterCommit } : {}) };
  }

  return {
    fromInline: (body) => (body.inapp ? { title: body.inapp.title, redirectURL: body.inapp.url, imageURL: body.inapp.image } : null),
    preview: (c) => str(c.title) ?? '',
    planned(rendered, { message, source, type, parameters, user }) {
      const settings = batchingOf(type.options?.INAPP_WEB);
      if (!settings) return rendered;
      const alone = { notificationId: message.notification_id, subNotificationId: message.sub_notification_id ?? undefined, title: rendered.title, redirectURL: rendered.redirectURL, imageURL: rendered.imageURL, parameters };
      // The batch copy stays unrendered: it is rendered over the batch when the send joins it.
      return { ...rendered, batching: planBatch(settings, alone, { template: source.batch, user }) };
    },
    // Deliveries queued as jobs (before this process delivered in-app inline) still run here.
    async deliver(input) {
      const batch = batchPlanOf(input.content);
      if (batch) {
        const { afterCommit, ...outcome } = await inapp.transaction((trx) => deliverBatched(trx, input, batch));
        await afterCommit?.();
        return outcome;
      }
      const stored = await inapp.deliver(storeInput(input));
      return { result: { providerMessageId: stored.notification.id }, delivered: true };
    },
    async deliverInTransaction(trx, inputs) {
      // Plain sends are stored with one statement for all of them; batched ones join their batches one by one, in order.
      const batches = inputs.map((input) => batchPlanOf(input.content));
      const plain = inputs.flatMap((input, i) => (batches[i] ? [] : [storeInput(input)]));
      const stored = plain.length > 0 ? await inapp.storeMany(trx, plain) : [];
      const outcomes: InTransactionOutcome[] = [];
      let next = 0;
      for (const [i, input] of inputs.entries()) {
        const batch = batches[i];
        if (batch) {
          outcomes.push(await deliverBatched(trx, input, batch));
          continue;
        }
        const scope = plain[next];
        const { notification, created } = stored[next++];
        outcomes.push({
          result: { providerMessageId: notification.id },
          delivered: true,
          ...(created ? { afterCommit: () => inapp.publish(scope, [notification]) } : {}),
        });
      }
      return outcomes;
    },
  };
}

import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import type { CoreTables } from '../../storage/schema.js';
import type { LogChannel } from './channels.js';
import type { DeliveryRow, SendingDb, SendingTables } from './sending.tables.js';

export interface ProviderStatus {
  channel: LogChannel;
  /** The id the provider gave when it accepted the message (Twilio SID, ...). */
  providerMessageId: string;
  status: 'delivered' | 'failed';
  at?: Date;
  /** Readable failure code, e.g. UNDELIVERED, BUSY, NO_ANSWER (recorded as <channel>_failed_code). */
  code?: string;
  internal?: string;
  /** Channel log fields to merge, e.g. {call_delivered_code: 'completed', call_delivered_cost: 0.013}. */
  extra?: Record<string, unknown>;
}

const db = (deps: Pick<Deps, 'db'>): SendingDb => (deps.db as Kysely<CoreTables>).withTables<SendingTables>();

/**
 * Records a provider's report about a message and applies it to its delivery. A report that
 * arrives before the delivery committed the provider id waits and is applied by
 * applyPendingEvents once it has. Returns the delivery when it was applied now.
 */
export async function recordProviderStatus(deps: Pick<Deps, 'db' | 'ids' | 'clock'>, event: ProviderStatus): Promise<DeliveryRow | null> {
  await db(deps)
    .insertInto('provider_events')
    .values({
      id: deps.ids.uuid(),
      channel: event.channel,
      provider_message_id: event.providerMessageId,
      status: event.status,
      at: (event.at ?? deps.clock.now()).toISOString(),
      code: event.code ?? null,
      internal: event.internal ?? null,
      extra: event.extra ? JSON.stringify(event.extra) : null,
      applied_at: null,
    })
    .execute();
  const applied = await applyPendingEvents(deps, event.channel, event.providerMessageId);
  return applied;
}

/** Applies waiting reports for one provider message id; called after a delivery records that id. */
export async function applyPendingEvents(deps: Pick<Deps, 'db' | 'clock'>, channel: string, providerMessageId: string): Promise<DeliveryRow | null> {
  return db(deps)
    .transaction()
    .execute(async (trx) => {
      const delivery = await trx
        .selectFrom('deliveries')
        .selectAll()
        .where('channel', '=', channel)
        .where('provider_message_id', '=', providerMessageId)
        .executeTakeFirst();
      if (!delivery) return null;
      const events = await trx
        .selectFrom('provider_events')
        .selectAll()
        .where('channel', '=', channel)
        .where('provider_message_id', '=', providerMessageId)
        .where('applied_at', 'is', null)
        .orderBy('at')
        .execute();
      if (events.length === 0) return null;
      let extra: Record<string, unknown> = delivery.extra ? JSON.parse(delivery.extra) : {};
      const patch: Partial<DeliveryRow> = {};
      for (const e of events) {
        if (e.extra) extra = { ...extra, ...JSON.parse(e.extra) };
        if (e.status === 'delivered') Object.assign(patch, { status: 'delivered', delivered_at: e.at });
        else Object.assign(patch, { status: 'failed', failed_at: e.at, failed_code: e.code, failed_internal: e.internal });
      }
      const now = deps.clock.now().toISOString();
      await trx
        .updateTable('deliveries')
        .set({ ...patch, extra: Object.keys(extra).length ? JSON.stringify(extra) : null, updated_at: now })
        .where('id', '=', delivery.id)
        .execute();
      await trx
        .updateTable('provider_events')
        .set({ applied_at: now })
        .where('id', 'in', events.map((e) => e.id))
        .execute();
      return { ...delivery, ...patch };
    });
}

/** The delivery a provider message id belongs to (inbound replies, callbacks). */
export function findDeliveryByProviderId(deps: Pick<Deps, 'db'>, channel: string, providerMessageId: string): Promise<DeliveryRow | undefined> {
  return db(deps).selectFrom('deliveries').selectAll().where('channel', '=', channel).where('provider_message_id', '=', providerMessageId).executeTakeFirst();
}

import type { TestContext } from '../helpers/context.js';
import { deliveryRow, messageRow, seed } from '../delivery/ledger-fixtures.js';
import type { AttemptRow } from '../../src/modules/sending/sending.tables.js';

let counter = 0;

/**
 * Makes the ledger apply one transition in the test account's environment, the way the
 * channels do: a delivery of `channel` goes pending -> failed, pending -> sent, or (SMS) sent ->
 * delivered by the carrier's report. Returns the message's tracking id.
 */
export async function transition(t: TestContext, channel: string, to: 'failed' | 'sent' | 'delivered', options: { envId?: string; accountId?: string } = {}): Promise<string> {
  const n = ++counter;
  const at = t.deps.clock.now().toISOString();
  const message = messageRow({
    tracking_id: `wh-${n}-${Date.now().toString(36)}`,
    account_id: options.accountId ?? t.account.accountId,
    env_id: options.envId ?? t.account.clientId,
    notification_id: 'order_shipped',
    user_id: `user-${n}`,
    state: 'processed',
    received_at: at,
  });
  const delivery = deliveryRow(message, { id: `${message.tracking_id}-${channel}`, channel, created_at: at, updated_at: at });
  await seed(t.deps.db, [message], [delivery]);
  const attempt: AttemptRow = { id: `${delivery.id}-a1`, delivery_id: delivery.id, attempt: 1, started_at: at, duration_ms: 3, outcome: 'success', provider_code: null, detail: null };
  if (to === 'failed') {
    await t.deps.ledger.failDelivery(delivery.id, { at, code: `${channel.toUpperCase()}_REFUSED`, reason: 'the provider refused it', extra: { [`${channel}_failed_internal`]: 'refused' } });
  } else {
    await t.deps.ledger.transaction((tx) => tx.deliverySucceeded(delivery.id, attempt, { at, providerMessageId: `pm-${delivery.id}` }));
    if (to === 'delivered') await t.deps.ledger.recordProviderStatus({ channel: channel as 'sms', providerMessageId: `pm-${delivery.id}`, status: 'delivered', at: new Date(at) });
  }
  return message.tracking_id;
}

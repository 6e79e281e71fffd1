import type { Logger } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import type { WebhookWorkerOptions } from '../../src/modules/webhooks/webhooks.worker.js';
import { WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import type { Dialect } from '../../src/storage/db.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
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

/** A test context under a manual clock, a loopback receiver, and a webhooks service of its own. */
export interface ManualClockWebhooks {
  t: TestContext;
  receiver: WebhookReceiver;
  service: WebhooksService;
  clock: ManualClock;
  scope: () => { accountId: string; envId: string };
}

/**
 * Registers the suite's beforeAll/afterAll that make and close a ManualClockWebhooks: short
 * timeouts, private addresses allowed (the receiver is on loopback), and the retry jitter fixed
 * at its middle so that the delays are the schedule's own. Its fields are set once beforeAll ran.
 */
export function manualClockWebhooks(kind: Dialect): ManualClockWebhooks {
  const clock = new ManualClock();
  const h = { clock, scope: () => ({ accountId: h.t.account.accountId, envId: h.t.account.clientId }) } as ManualClockWebhooks;
  beforeAll(async () => {
    h.t = await createTestContext(kind, { clock, config: { allowPrivateNetworks: true, webhookTimeoutMs: 300 } });
    h.receiver = await new WebhookReceiver().start();
    h.service = new WebhooksService(h.t.deps, { random: () => 0.5 });
  });
  afterAll(async () => {
    await h.service.sender.close();
    await h.receiver.close();
    await h.t.close();
  });
  return h;
}

/**
 * A webhooks service of its own over the context's database, for tests that hold requests in
 * flight while they act: its requests time out after 30 s (not the context's 300 ms, which a
 * loaded machine can spend between two steps), so a held request ends only when the test
 * answers it. The worker's lease outlasts that by 5 s, on the manual clock.
 */
export function patientService(t: TestContext, options: Partial<WebhookWorkerOptions> = {}, logger?: Logger): WebhooksService {
  const config = { ...t.deps.config, webhookTimeoutMs: 30_000 };
  return new WebhooksService({ ...t.deps, config, ...(logger ? { logger } : {}) }, { random: () => 0.5, ...options });
}

import type { PushLifetimeStart } from '../../../channels/push/push-lifetime.js';
import type { DeliveryRow, MessageRow } from '../sending.tables.js';

/**
 * Where a push delivery's lifetime (options.apn.expiry, options.fcm.android.ttl,
 * CLARION_WEB_PUSH_TTL) starts, the same on every attempt: the send's own time, its schedule
 * else when it was accepted (as deduplication windows are measured, send-gates.ts).
 */
export function pushLifetimeStart(delivery: Pick<DeliveryRow, 'attempts'>, message: Pick<MessageRow, 'scheduled_for' | 'received_at'>): PushLifetimeStart {
  return { atMs: Date.parse(message.scheduled_for ?? message.received_at), firstAttempt: delivery.attempts === 0 };
}

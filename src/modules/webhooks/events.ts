/**
 * The webhook event catalogue: every event name of the spec, what produces it, and how an event
 * is made from a ledger transition (delivery_events). Payloads are the pingram SDK's
 * `WebhookEvent` (eventType, channel, userId, notificationId, trackingId, failureCode,
 * clickedLink, clickedLinkTags) plus `id`, `occurredAt` and the event's own `details`; every
 * payload is documented with an example in docs/webhooks.md.
 */

/** The SDK's ChannelsEnum values (VOICE for the voice agent events). */
export type EventChannel = 'EMAIL' | 'INAPP_WEB' | 'SMS' | 'CALL' | 'PUSH' | 'WEB_PUSH' | 'SLACK' | 'VOICE';

/** What produces an event: the delivery ledger today; the others come with their features. */
export type EventSource = 'ledger' | 'tracking' | 'unsubscribe' | 'inbound' | 'voice';

export interface EventDefinition {
  channel: EventChannel;
  source: EventSource;
  /** One line for the docs. */
  description: string;
}

export const EVENT_CATALOGUE = {
  EMAIL_DELIVERED: { channel: 'EMAIL', source: 'ledger', description: 'The receiving SMTP server accepted the message (250 after DATA).' },
  EMAIL_FAILED: { channel: 'EMAIL', source: 'ledger', description: 'The email could not be delivered (refused recipient, SMTP error, retries exhausted, render failure).' },
  EMAIL_OPEN: { channel: 'EMAIL', source: 'tracking', description: "The tracking pixel was loaded (every open, the first and later ones)." },
  EMAIL_CLICK: { channel: 'EMAIL', source: 'tracking', description: 'A tracked link was followed; clickedLink and clickedLinkTags say which.' },
  EMAIL_UNSUBSCRIBE: { channel: 'EMAIL', source: 'unsubscribe', description: 'The user unsubscribed (List-Unsubscribe one-click, the unsubscribe page, or mail to the List-Unsubscribe address).' },
  EMAIL_INBOUND: { channel: 'EMAIL', source: 'inbound', description: "An email arrived at one of the account's addresses." },
  INAPP_WEB_FAILED: { channel: 'INAPP_WEB', source: 'ledger', description: 'The in-app notification could not be stored or rendered.' },
  INAPP_WEB_UNSUBSCRIBE: { channel: 'INAPP_WEB', source: 'unsubscribe', description: 'The user turned in-app notifications of this type off.' },
  SMS_DELIVERED: { channel: 'SMS', source: 'ledger', description: "The carrier reported the SMS delivered to the handset." },
  SMS_FAILED: { channel: 'SMS', source: 'ledger', description: 'The SMS failed (refused by the provider, or reported undelivered by the carrier).' },
  SMS_UNSUBSCRIBE: { channel: 'SMS', source: 'inbound', description: 'The user texted STOP (or a synonym).' },
  SMS_SUBSCRIBE: { channel: 'SMS', source: 'inbound', description: 'The user texted START (or a synonym).' },
  SMS_INBOUND: { channel: 'SMS', source: 'inbound', description: 'The user texted one of your numbers; trackingId is the last send to that user from that number.' },
  VOICE_INBOUND: { channel: 'VOICE', source: 'voice', description: 'A call came in to a voice agent.' },
  VOICE_CONNECTED: { channel: 'VOICE', source: 'voice', description: 'A voice agent call connected.' },
  VOICE_ENDED: { channel: 'VOICE', source: 'voice', description: 'A voice agent call ended.' },
  PUSH_FAILED: { channel: 'PUSH', source: 'ledger', description: 'The mobile push (APNs or FCM) failed.' },
  PUSH_UNSUBSCRIBE: { channel: 'PUSH', source: 'unsubscribe', description: 'The user turned mobile push of this type off.' },
  CALL_FAILED: { channel: 'CALL', source: 'ledger', description: 'The automated call failed (refused, busy, no answer).' },
  CALL_UNSUBSCRIBE: { channel: 'CALL', source: 'unsubscribe', description: 'The user turned calls of this type off.' },
  WEB_PUSH_FAILED: { channel: 'WEB_PUSH', source: 'ledger', description: 'The web push failed (the push service refused it or the subscription is gone).' },
  WEB_PUSH_UNSUBSCRIBE: { channel: 'WEB_PUSH', source: 'unsubscribe', description: 'The user turned web push of this type off.' },
  SLACK_FAILED: { channel: 'SLACK', source: 'ledger', description: 'The Slack message failed.' },
  SLACK_UNSUBSCRIBE: { channel: 'SLACK', source: 'unsubscribe', description: 'The user turned Slack messages of this type off.' },
} as const satisfies Record<string, EventDefinition>;

export type WebhookEventType = keyof typeof EVENT_CATALOGUE;
export const EVENT_TYPES = Object.keys(EVENT_CATALOGUE) as WebhookEventType[];

export function isEventType(value: string): value is WebhookEventType {
  return Object.prototype.hasOwnProperty.call(EVENT_CATALOGUE, value);
}

/** The SDK channel of a log channel (delivery_events.channel). */
const CHANNEL_OF_LOG: Record<string, EventChannel> = {
  email: 'EMAIL',
  inapp: 'INAPP_WEB',
  sms: 'SMS',
  call: 'CALL',
  mobile_push: 'PUSH',
  web_push: 'WEB_PUSH',
  slack: 'SLACK',
};

const FAILED_EVENT: Record<EventChannel, WebhookEventType | undefined> = {
  EMAIL: 'EMAIL_FAILED',
  INAPP_WEB: 'INAPP_WEB_FAILED',
  SMS: 'SMS_FAILED',
  CALL: 'CALL_FAILED',
  PUSH: 'PUSH_FAILED',
  WEB_PUSH: 'WEB_PUSH_FAILED',
  SLACK: 'SLACK_FAILED',
  VOICE: undefined,
};

/** A ledger transition as the dispatcher reads it (delivery_events joined with its message and delivery). */
export interface TransitionRow {
  id: number;
  account_id: string;
  env_id: string;
  tracking_id: string;
  kind: string;
  channel: string | null;
  from_state: string | null;
  to_state: string;
  code: string | null;
  at: string;
  user_id: string | null;
  notification_id: string | null;
  /** The delivery's failed_internal, when it failed. */
  reason: string | null;
  /** The delivery's channel log fields (deliveries.extra), JSON. */
  extra: string | null;
}

/**
 * The webhook event a ledger transition produces, or null:
 * - email: into `sent` (the receiving SMTP server said 250 after DATA) or `delivered` -> EMAIL_DELIVERED;
 * - SMS: into `delivered` (the carrier's report) -> SMS_DELIVERED;
 * - any channel: into `failed` -> <CHANNEL>_FAILED.
 * A message that failed before it had deliveries has no channel, so no channel event.
 */
export function eventTypeOf(row: Pick<TransitionRow, 'kind' | 'channel' | 'to_state' | 'from_state'>): WebhookEventType | null {
  if (row.kind !== 'delivery' || !row.channel) return null;
  const channel = CHANNEL_OF_LOG[row.channel];
  if (!channel) return null;
  if (row.to_state === 'failed') return FAILED_EVENT[channel] ?? null;
  if (channel === 'EMAIL' && (row.to_state === 'sent' || (row.to_state === 'delivered' && row.from_state !== 'sent'))) return 'EMAIL_DELIVERED';
  if (channel === 'SMS' && row.to_state === 'delivered') return 'SMS_DELIVERED';
  return null;
}

/** The JSON body of a webhook delivery. */
export interface WebhookPayload {
  /** The event id: the same as the X-Service-Id and webhook-id headers, stable across retries and replays. */
  id: string;
  eventType: WebhookEventType;
  channel: EventChannel;
  userId: string;
  notificationId: string;
  trackingId: string;
  failureCode?: string;
  clickedLink?: string;
  clickedLinkTags?: Record<string, string[]>;
  /** EMAIL_* events of a broadcast recipient's message: the broadcast. */
  broadcastId?: string;
  /** When it happened (ISO 8601). */
  occurredAt: string;
  /** The event's own details (see docs/webhooks.md). */
  details: Record<string, unknown>;
}

/** The payload of a ledger transition's event. */
export function payloadOfTransition(id: string, type: WebhookEventType, row: TransitionRow): WebhookPayload {
  const logChannel = row.channel ?? '';
  const extra = row.extra ? (JSON.parse(row.extra) as Record<string, unknown>) : {};
  // The channel's own log fields (email_failed_recipient, sms_delivered_at, ...).
  const fields = Object.fromEntries(Object.entries(extra).filter(([key]) => key.startsWith(`${logChannel}_`)));
  const failed = row.to_state === 'failed';
  return {
    id,
    eventType: type,
    channel: EVENT_CATALOGUE[type].channel,
    userId: row.user_id ?? '',
    notificationId: row.notification_id ?? '',
    trackingId: row.tracking_id,
    ...(failed && row.code ? { failureCode: row.code } : {}),
    occurredAt: row.at,
    details: {
      ...fields,
      [failed ? `${logChannel}_failed_at` : row.to_state === 'sent' ? `${logChannel}_sent_at` : `${logChannel}_delivered_at`]: row.at,
      ...(failed && row.reason ? { reason: row.reason } : {}),
    },
  };
}

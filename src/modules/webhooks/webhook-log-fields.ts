import type { PostResult } from './webhook-sender.js';

/**
 * The log fields that tell what the customer's endpoint answered for an event of a message (the
 * spec's Log record and the pingram SDK's LogsGetResponseLogsInner): per event type, the channel
 * whose delivery holds them and the field prefix. `<prefix>_res` is set on every type listed;
 * `<prefix>_delivered` (boolean) only where the spec and the SDK have it.
 */
const LOG_FIELDS: Record<string, { channel: string; prefix: string; delivered: boolean }> = {
  EMAIL_DELIVERED: { channel: 'email', prefix: 'email_delivered_webhook', delivered: false },
  EMAIL_FAILED: { channel: 'email', prefix: 'email_failed_webhook', delivered: false },
  EMAIL_OPEN: { channel: 'email', prefix: 'email_opened_webhook', delivered: false },
  EMAIL_CLICK: { channel: 'email', prefix: 'email_clicked_webhook', delivered: false },
  EMAIL_INBOUND: { channel: 'email', prefix: 'email_inbound_webhook', delivered: true },
  SMS_INBOUND: { channel: 'sms', prefix: 'sms_inbound_webhook', delivered: true },
  SMS_UNSUBSCRIBE: { channel: 'sms', prefix: 'sms_unsubscribe_webhook', delivered: true },
  SMS_SUBSCRIBE: { channel: 'sms', prefix: 'sms_subscribe_webhook', delivered: true },
};

/** Characters of the endpoint's body kept in `_webhook_res` (the whole first 4 KB is in the attempts). */
export const RES_BODY_CHARS = 200;

/**
 * The `_webhook_res` summary of a settled attempt (docs/webhooks.md): `HTTP <status>` and, when
 * the endpoint answered a body, `: ` and its first RES_BODY_CHARS characters with whitespace
 * runs folded to one space; with no answer at all, the reason (`TIMEOUT: ...`,
 * `NETWORK: ...`, `ADDRESS_BLOCKED: ...`: the SafeFetchError code and message). Never a header, the secret or the signature.
 */
export function webhookRes(result: PostResult): string {
  if (result.statusCode === null) return result.error ?? 'no response';
  const redirect = result.statusCode >= 300 && result.statusCode < 400 ? ' (redirects are not followed)' : '';
  const body = result.body.replace(/\s+/g, ' ').trim();
  const cut = body.length > RES_BODY_CHARS ? `${body.slice(0, RES_BODY_CHARS)}...` : body;
  return `HTTP ${result.statusCode}${redirect}${cut ? `: ${cut}` : ''}`;
}

/** A settled attempt's fields for its message's log, or null (an event type without such fields). */
export function webhookLogFields(eventType: string, success: boolean, result: PostResult): { channel: string; fields: Record<string, unknown> } | null {
  const spec = Object.prototype.hasOwnProperty.call(LOG_FIELDS, eventType) ? LOG_FIELDS[eventType] : undefined;
  if (!spec) return null;
  const fields: Record<string, unknown> = { [`${spec.prefix}_res`]: webhookRes(result) };
  if (spec.delivered) fields[`${spec.prefix}_delivered`] = success;
  return { channel: spec.channel, fields };
}

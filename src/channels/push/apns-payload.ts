import type { MobilePushMessage } from './types.js';

/** APNs refuses larger payloads (413 PayloadTooLarge); checked before the request. */
export const APNS_MAX_PAYLOAD_BYTES = 4096;

export interface ApnsRequest {
  /** apns-* headers (authorization is added per request). */
  headers: Record<string, string>;
  /** The JSON body. */
  payload: string;
}

/**
 * Headers and JSON body of one APNs notification. Without title and message, content-available
 * makes a silent background push (apns-push-type background, priority 5, as Apple requires).
 */
export function buildApnsRequest(message: MobilePushMessage, topic: string, nowSeconds: number): ApnsRequest {
  const o = message.apn ?? {};
  const hasAlert = Boolean(message.title || message.message);
  const background = Boolean(o.contentAvailable) && !hasAlert;

  const aps: Record<string, unknown> = {};
  if (hasAlert) {
    const alert: Record<string, string> = {};
    if (message.title) alert.title = message.title;
    if (message.message) alert.body = message.message;
    aps.alert = alert;
  }
  if (o.badge !== undefined) aps.badge = o.badge;
  if (o.sound !== undefined && o.sound !== '') aps.sound = o.sound;
  if (o.threadId) aps['thread-id'] = o.threadId;
  if (o.contentAvailable) aps['content-available'] = 1;
  // Custom keys sit beside aps; "aps" itself is Apple's and cannot be overridden.
  const custom = Object.entries(message.customData ?? {})
    .filter(([key]) => key !== 'aps')
    .slice(0, 3);

  const headers: Record<string, string> = {
    'apns-topic': topic,
    'apns-push-type': background ? 'background' : 'alert',
    'apns-priority': String(background ? 5 : o.priority === 5 || o.priority === 1 ? o.priority : 10),
  };
  // expiry is seconds from now; 0 means "deliver now or never" (apns-expiration: 0).
  if (o.expiry !== undefined && Number.isFinite(o.expiry)) headers['apns-expiration'] = o.expiry <= 0 ? '0' : String(nowSeconds + Math.floor(o.expiry));
  if (o.collapseId) headers['apns-collapse-id'] = o.collapseId;
  return { headers, payload: JSON.stringify({ aps, ...Object.fromEntries(custom) }) };
}

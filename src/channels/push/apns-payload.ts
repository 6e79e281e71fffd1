import { fittedTitleAndBody } from './fit-text.js';
import { pushLifetime } from './push-lifetime.js';
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
 * Throws PUSH_EXPIRED when the push's expiry has run out before this attempt (`nowMs`).
 */
export function buildApnsRequest(message: MobilePushMessage, topic: string, nowMs: number): ApnsRequest {
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
  Object.assign(aps, apsOptions(o));
  // Custom keys sit beside aps; "aps" itself is Apple's and cannot be overridden.
  const custom = Object.entries(message.customData ?? {})
    .filter(([key]) => key !== 'aps')
    .slice(0, 3);

  const headers: Record<string, string> = {
    'apns-topic': topic,
    'apns-push-type': background ? 'background' : 'alert',
    'apns-priority': String(background ? 5 : o.priority === 5 || o.priority === 1 ? o.priority : 10),
  };
  const expiration = apnsExpiration(message, nowMs);
  if (expiration !== undefined) headers['apns-expiration'] = expiration;
  const collapseId = o.collapseId || message.dedupeKey;
  if (collapseId) headers['apns-collapse-id'] = collapseId;
  return { headers, payload: fittedPayload(aps, Object.fromEntries(custom)) };
}

/** The aps keys options.apn sets besides the alert: badge, sound, thread-id, content-available. */
export function apsOptions(o: NonNullable<MobilePushMessage['apn']>): Record<string, unknown> {
  const aps: Record<string, unknown> = {};
  if (o.badge !== undefined) aps.badge = o.badge;
  if (o.sound !== undefined && o.sound !== '') aps.sound = o.sound;
  if (o.threadId) aps['thread-id'] = o.threadId;
  if (o.contentAvailable) aps['content-available'] = 1;
  return aps;
}

/**
 * The apns-expiration header of options.apn.expiry, or undefined without one. The expiry counts
 * from the send, so every attempt carries the same absolute time; 0 means "deliver now or
 * never". Throws PUSH_EXPIRED when it has run out before this attempt (`nowMs`).
 */
export function apnsExpiration(message: MobilePushMessage, nowMs: number): string | undefined {
  const expiry = message.apn?.expiry;
  if (expiry === undefined || !Number.isFinite(expiry)) return undefined;
  const lifetime = pushLifetime(expiry, message.lifetimeStart, nowMs, 'options.apn.expiry');
  return lifetime.kind === 'now-or-never' ? '0' : String(Math.floor(lifetime.deadlineMs / 1000));
}

/**
 * The JSON body within APNS_MAX_PAYLOAD_BYTES when shortening the alert can make it so: the body
 * first, then the title (cut between characters, ending with "…"), as Apple advises for long
 * text. The API takes a 500-character title and a 4,000-character message, 4.5 KB of ASCII and
 * more of other scripts, which APNs would refuse. Custom data is never cut: a payload too large
 * with an empty alert is left as is (the send fails APNS_PAYLOAD_TOO_LARGE).
 */
function fittedPayload(aps: Record<string, unknown>, custom: Record<string, unknown>): string {
  const build = (alert: unknown) => JSON.stringify({ aps: alert === undefined ? aps : { ...aps, alert }, ...custom });
  const alert = aps.alert as Record<string, string> | undefined;
  if (!alert) return build(alert);
  return build(fittedTitleAndBody(alert, (a) => Buffer.byteLength(build(a)) <= APNS_MAX_PAYLOAD_BYTES));
}

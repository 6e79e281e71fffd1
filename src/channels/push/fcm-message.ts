import { DeliveryError } from '../types.js';
import type { HttpAnswer } from './fcm-http.js';
import { apnsExpiration, apsOptions } from './apns-payload.js';
import { fittedTitleAndBody } from './fit-text.js';
import { pushLifetime } from './push-lifetime.js';
import type { MobilePushMessage } from './types.js';

/**
 * FCM's limit on a message's payload ("Maximum payload for both message types is 4096 bytes";
 * larger ones are answered 400 INVALID_ARGUMENT "Android message is too big"). FCM does not say
 * what it counts; Clarion counts the payload a device receives: the JSON of `notification` and
 * `data` (see fcmPayloadBytes).
 */
export const FCM_MAX_PAYLOAD_BYTES = 4096;

/** The `message` of an FCM HTTP v1 `messages:send` request (only the parts Clarion sets). */
export interface FcmV1Message {
  token: string;
  notification: { title: string; body: string };
  data?: Record<string, string>;
  android?: { collapse_key?: string; priority?: 'HIGH' | 'NORMAL'; ttl?: string; restricted_package_name?: string; notification?: { tag: string } };
  apns?: { headers: Record<string, string>; payload?: { aps: Record<string, unknown> } };
}

/** FCM durations are seconds with up to nine fractional digits and an "s" suffix. */
function duration(seconds: number): string {
  const s = Math.max(0, seconds);
  return `${Number.isInteger(s) ? s : Number(s.toFixed(9))}s`;
}

/** The bytes of `message` that count toward FCM_MAX_PAYLOAD_BYTES: the JSON of its notification and data. */
export function fcmPayloadBytes(message: Pick<FcmV1Message, 'notification' | 'data'>): number {
  return Buffer.byteLength(JSON.stringify({ notification: message.notification, ...(message.data ? { data: message.data } : {}) }));
}

/**
 * Maps one MobilePushMessage for one device token to the FCM HTTP v1 request body, at `nowMs`.
 * A notification too large for FCM_MAX_PAYLOAD_BYTES has its body, then its title, shortened
 * (as for APNs); custom data is never cut, so the result may still be too large (the caller
 * checks). android.ttl is what is left of the sender's ttl, counted from the send (an explicit
 * 0 stays "0s" on the first attempt); throws PUSH_EXPIRED when nothing is left.
 */
export function buildFcmRequest(token: string, message: MobilePushMessage, nowMs: number): { message: FcmV1Message } {
  const data = message.customData && Object.keys(message.customData).length > 0 ? Object.fromEntries(Object.entries(message.customData).map(([k, v]) => [k, String(v)])) : undefined;
  const notification = fittedTitleAndBody({ title: message.title, body: message.message }, (n) => fcmPayloadBytes({ notification: n, data }) <= FCM_MAX_PAYLOAD_BYTES);
  const out: FcmV1Message = { token, notification };
  if (data) out.data = data;
  const a = message.fcm?.android ?? {};
  const android: NonNullable<FcmV1Message['android']> = {};
  if (a.collapseKey !== undefined) android.collapse_key = a.collapseKey;
  if (a.priority !== undefined) android.priority = a.priority.toLowerCase() === 'high' ? 'HIGH' : 'NORMAL';
  if (a.ttl !== undefined && Number.isFinite(a.ttl)) {
    const lifetime = pushLifetime(a.ttl, message.lifetimeStart, nowMs, 'options.fcm.android.ttl');
    android.ttl = lifetime.kind === 'now-or-never' ? duration(0) : duration(lifetime.remainingMs / 1000);
  }
  if (a.restrictedPackageName !== undefined) android.restricted_package_name = a.restrictedPackageName;
  // A push sent twice replaces itself in the drawer (Android) or shows once (iOS through FCM).
  if (message.dedupeKey) android.notification = { tag: message.dedupeKey };
  if (Object.keys(android).length > 0) out.android = android;
  const apns = apnsConfig(message, notification, nowMs);
  if (apns) out.apns = apns;
  return { message: out };
}

/**
 * apns-expiration through FCM. An FCM token may be an Android device's, which options.apn.expiry
 * does not concern: an expiry run out does not fail the push (as it does a direct APNs one) but
 * becomes "0", which APNs delivers only if the device is reachable at once and never stores.
 */
function iosExpiration(message: MobilePushMessage, nowMs: number): string | undefined {
  try {
    return apnsExpiration(message, nowMs);
  } catch (error) {
    if (error instanceof DeliveryError && error.code === 'PUSH_EXPIRED') return '0';
    throw error;
  }
}

/**
 * The apns part, for an iOS app registered with FCM: FCM hands it to APNs. options.apn applies
 * to every push that reaches APNs, direct or through FCM: without apns-expiration FCM keeps an
 * iOS push for 30 days (its documented default), so a send's expiry must travel here too. The
 * collapse id is the send's own, else the delivery's dedupe key. FCM's apns `payload` replaces
 * the notification's title and body on iOS, so one that carries aps keys carries the alert too.
 */
function apnsConfig(message: MobilePushMessage, notification: FcmV1Message['notification'], nowMs: number): FcmV1Message['apns'] | undefined {
  const o = message.apn ?? {};
  const headers: Record<string, string> = {};
  const collapseId = o.collapseId || message.dedupeKey;
  if (collapseId) headers['apns-collapse-id'] = collapseId;
  const expiration = iosExpiration(message, nowMs);
  if (expiration !== undefined) headers['apns-expiration'] = expiration;
  if (o.priority === 1 || o.priority === 5 || o.priority === 10) headers['apns-priority'] = String(o.priority);
  const aps = apsOptions(o);
  if (Object.keys(headers).length === 0 && Object.keys(aps).length === 0) return undefined;
  const apns: NonNullable<FcmV1Message['apns']> = { headers };
  if (Object.keys(aps).length > 0) apns.payload = { aps: { alert: { title: notification.title, body: notification.body }, ...aps } };
  return apns;
}

/** The parts of a google.rpc.Status error body that classify an FCM failure. */
export interface FcmErrorInfo {
  httpStatus: number;
  /** google.rpc status, e.g. NOT_FOUND, INVALID_ARGUMENT, UNAUTHENTICATED. */
  status?: string;
  /** FcmError.errorCode, e.g. UNREGISTERED, QUOTA_EXCEEDED, SENDER_ID_MISMATCH. */
  errorCode?: string;
  message: string;
  /** google.rpc.BadRequest field violations' field names, e.g. message.token. */
  fields: string[];
}

export function parseFcmError(answer: HttpAnswer): FcmErrorInfo {
  const info: FcmErrorInfo = { httpStatus: answer.status, message: `HTTP ${answer.status}`, fields: [] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.text);
  } catch {
    if (answer.text.trim()) info.message = `HTTP ${answer.status}: ${answer.text.trim().slice(0, 200)}`;
    return info;
  }
  const error = (parsed as { error?: unknown })?.error;
  if (!error || typeof error !== 'object') return info;
  const e = error as { message?: unknown; status?: unknown; details?: unknown };
  if (typeof e.message === 'string' && e.message) info.message = e.message.slice(0, 500);
  if (typeof e.status === 'string') info.status = e.status;
  for (const detail of Array.isArray(e.details) ? e.details : []) {
    if (!detail || typeof detail !== 'object') continue;
    const d = detail as { '@type'?: unknown; errorCode?: unknown; fieldViolations?: unknown };
    const type = typeof d['@type'] === 'string' ? d['@type'] : '';
    if (type.endsWith('.FcmError') && typeof d.errorCode === 'string') info.errorCode = d.errorCode;
    if (type.endsWith('google.rpc.BadRequest') && Array.isArray(d.fieldViolations)) {
      for (const v of d.fieldViolations) if (v && typeof (v as { field?: unknown }).field === 'string') info.fields.push((v as { field: string }).field);
    }
  }
  return info;
}

/** An UNAUTHENTICATED answer that a fresh access token may cure (not FCM's own APNs/web-push auth error). */
export function isAccessTokenRejected(info: FcmErrorInfo): boolean {
  return info.httpStatus === 401 && info.errorCode !== 'THIRD_PARTY_AUTH_ERROR';
}

/**
 * FCM's documented error codes, as DeliveryErrors: gone or malformed tokens are recipientInvalid
 * (the caller removes them), quota and server errors are retried honouring Retry-After, the rest
 * is permanent.
 */
export function classifyFcmError(info: FcmErrorInfo, token: string, retryAfter: number | undefined): DeliveryError {
  const code = info.errorCode ?? info.status;
  const providerCode = code ?? String(info.httpStatus);
  const detail = `FCM answered ${info.httpStatus}${code ? ` ${code}` : ''}: ${info.message}`;
  const retry = retryAfter !== undefined ? { retryAfterMs: retryAfter } : {};

  // Only FCM's own UNREGISTERED removes a token: a bare 404 (a wrong base URL, a proxy) says nothing about it.
  if (info.errorCode === 'UNREGISTERED') {
    return new DeliveryError('FCM_UNREGISTERED', detail, { retryable: false, providerCode, recipient: token, recipientInvalid: true });
  }
  if (info.errorCode === 'INVALID_ARGUMENT' || info.httpStatus === 400) {
    const aboutToken =
      info.fields.includes('message.token') || (info.fields.length === 0 && info.errorCode === 'INVALID_ARGUMENT' && /registration token/i.test(info.message));
    if (aboutToken) return new DeliveryError('FCM_INVALID_TOKEN', detail, { retryable: false, providerCode, recipient: token, recipientInvalid: true });
    return new DeliveryError('FCM_INVALID_ARGUMENT', detail, { retryable: false, providerCode });
  }
  if (info.errorCode === 'QUOTA_EXCEEDED' || info.httpStatus === 429) {
    return new DeliveryError('FCM_QUOTA_EXCEEDED', detail, { retryable: true, providerCode, ...retry });
  }
  if (info.errorCode === 'SENDER_ID_MISMATCH') {
    return new DeliveryError('FCM_SENDER_ID_MISMATCH', detail, { retryable: false, providerCode, recipient: token });
  }
  if (info.errorCode === 'THIRD_PARTY_AUTH_ERROR') {
    return new DeliveryError('FCM_THIRD_PARTY_AUTH_ERROR', detail, { retryable: false, providerCode });
  }
  if (info.httpStatus === 401) return new DeliveryError('FCM_AUTH_FAILED', detail, { retryable: false, providerCode });
  if (info.httpStatus === 403) return new DeliveryError('FCM_PERMISSION_DENIED', detail, { retryable: false, providerCode });
  if (info.httpStatus >= 500 || info.errorCode === 'UNAVAILABLE' || info.errorCode === 'INTERNAL') {
    return new DeliveryError('FCM_UNAVAILABLE', detail, { retryable: true, providerCode, ...retry });
  }
  return new DeliveryError('FCM_ERROR', detail, { retryable: false, providerCode });
}

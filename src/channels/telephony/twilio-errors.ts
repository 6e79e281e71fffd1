import { DeliveryError } from '../types.js';

/**
 * Twilio error codes (https://www.twilio.com/docs/api/errors) as readable, stable codes for the
 * log. REST rejections are 2xxxx; carrier outcomes reported in status callbacks are 3xxxx.
 */
const READABLE: Record<number, string> = {
  20003: 'PROVIDER_AUTH_FAILED',
  20404: 'PROVIDER_NOT_FOUND',
  20429: 'PROVIDER_RATE_LIMITED',
  21211: 'INVALID_TO_NUMBER',
  21212: 'INVALID_FROM_NUMBER',
  21408: 'REGION_NOT_ENABLED',
  21602: 'EMPTY_MESSAGE',
  21606: 'FROM_NOT_SMS_CAPABLE',
  21610: 'RECIPIENT_UNSUBSCRIBED',
  21612: 'UNROUTABLE_NUMBER',
  21614: 'NOT_A_MOBILE_NUMBER',
  21617: 'MESSAGE_TOO_LONG',
  21620: 'MEDIA_URL_INVALID',
  30001: 'QUEUE_OVERFLOW',
  30002: 'ACCOUNT_SUSPENDED',
  30003: 'UNREACHABLE',
  30004: 'MESSAGE_BLOCKED',
  30005: 'UNKNOWN_DESTINATION',
  30006: 'LANDLINE_OR_UNREACHABLE_CARRIER',
  30007: 'CARRIER_FILTERED',
  30008: 'UNKNOWN_ERROR',
  30019: 'MEDIA_TOO_LARGE',
  30034: 'UNREGISTERED_SENDER',
};

export function readableTwilioCode(code: number | string | undefined, fallback: string): string {
  const n = typeof code === 'string' ? Number(code) : code;
  return (n !== undefined && Number.isFinite(n) && READABLE[n]) || fallback;
}

/** The error document of the Twilio REST API: {code, message, more_info, status}. */
export interface TwilioErrorBody {
  code?: number;
  message?: string;
  more_info?: string;
  status?: number;
}

/**
 * Maps a failed REST exchange to a DeliveryError: 429 and 5xx are retried (honouring
 * Retry-After), other 4xx are permanent with a readable code derived from Twilio's error code.
 */
export function deliveryErrorFromResponse(status: number, body: TwilioErrorBody | undefined, retryAfter: string | null): DeliveryError {
  const code = body?.code;
  const text = `Twilio answered ${status}${code ? ` (error ${code})` : ''}: ${body?.message ?? 'no error message'}`;
  const providerCode = code ? String(code) : String(status);
  if (status === 429 || status >= 500) {
    // Twilio sends delay-seconds; anything else ("" included, which Number reads as 0) is none.
    const seconds = retryAfter !== null && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter) : NaN;
    return new DeliveryError(status === 429 ? 'PROVIDER_RATE_LIMITED' : 'PROVIDER_UNAVAILABLE', text, {
      retryable: true,
      providerCode,
      ...(Number.isFinite(seconds) && seconds >= 0 ? { retryAfterMs: Math.min(seconds, 3600) * 1000 } : {}),
    });
  }
  const fallback = status === 401 ? 'PROVIDER_AUTH_FAILED' : status === 404 ? 'PROVIDER_NOT_FOUND' : 'PROVIDER_REJECTED';
  const readable = readableTwilioCode(code, fallback);
  return new DeliveryError(readable, text, {
    retryable: false,
    providerCode,
    recipientInvalid: readable === 'INVALID_TO_NUMBER' || readable === 'NOT_A_MOBILE_NUMBER' || readable === 'RECIPIENT_UNSUBSCRIBED',
  });
}

import { isIP } from 'node:net';
import { SegmentedMessage } from 'sms-segments-calculator';
import { blockedReason } from '../../net/ssrf.js';

export interface SmsEncodingInfo {
  /** GSM-7 or UCS-2 (any character outside the GSM 03.38 alphabet, e.g. an emoji). */
  encoding: 'GSM-7' | 'UCS-2';
  segments: number;
}

/** How the text travels: encoding and number of concatenated segments (153/67 chars each when split). */
export function smsEncoding(text: string): SmsEncodingInfo {
  if (text === '') return { encoding: 'GSM-7', segments: 0 };
  // No smart encoding: the text is sent as written, so a curly quote makes the message UCS-2.
  const message = new SegmentedMessage(text, 'auto', false);
  return { encoding: message.getEncodingName() === 'UCS-2' ? 'UCS-2' : 'GSM-7', segments: message.segmentsCount };
}

const INTERNAL_NAMES = /(^|\.)(localhost|local|internal|localdomain|home\.arpa)$/i;

/**
 * Why a media URL cannot be given to the carrier, or undefined when it can: MMS media must be
 * public HTTPS, which the carrier fetches itself. Host names are judged by name (the carrier
 * resolves them, not us); IP literals by the same rules as every other outbound fetch.
 */
export function mediaUrlProblem(raw: string, allowPrivateNetworks = false): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:') return 'is not an https:// URL';
  if (url.username || url.password) return 'carries credentials';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host)) {
    const reason = blockedReason(host, allowPrivateNetworks);
    return reason ? `points to a ${reason}` : undefined;
  }
  if (!host.includes('.') || INTERNAL_NAMES.test(host)) return allowPrivateNetworks ? undefined : 'is not a public host name';
  return undefined;
}

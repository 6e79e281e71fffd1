import { invalid } from '../../errors.js';
import { APNS_MAX_PAYLOAD_BYTES } from './apns-payload.js';
import { FCM_MAX_PAYLOAD_BYTES, fcmPayloadBytes } from './fcm-message.js';

/**
 * Refuses at intake (400) an options.push.customData that no device could receive: custom data is
 * never cut, so one over APNs' or FCM's 4,096 bytes with the title and message shortened to nothing
 * would be accepted only to fail every device with APNS_PAYLOAD_TOO_LARGE / FCM_PAYLOAD_TOO_LARGE.
 * The values are strings (the send schema), at most 3 pairs.
 */
export function validateCustomData(customData: Record<string, string> | undefined): void {
  if (!customData) return;
  const fcm = fcmPayloadBytes({ notification: { title: '', body: '' }, data: customData });
  const custom = Object.fromEntries(Object.entries(customData).filter(([key]) => key !== 'aps'));
  const apns = Buffer.byteLength(JSON.stringify({ aps: {}, ...custom }));
  if (fcm > FCM_MAX_PAYLOAD_BYTES || apns > APNS_MAX_PAYLOAD_BYTES) {
    throw invalid(
      `options.push.customData takes ${Buffer.byteLength(JSON.stringify(customData))} bytes of JSON: with the title and message cut to nothing, the push would still be over the 4,096 bytes APNs and FCM accept.`,
      'Send an id in customData and let the app fetch the rest; custom data is never shortened.',
    );
  }
}

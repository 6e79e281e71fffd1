import type { DeliveryResult } from '../types.js';
import type { PushLifetimeStart } from './push-lifetime.js';

/** A mobile device token as stored on the user (spec: PushToken). */
export interface PushToken {
  type: 'FCM' | 'APN';
  token: string;
  device: { device_id: string; app_id?: string; ad_id?: string; platform?: string; manufacturer?: string; model?: string };
  /** For APN: 'production' goes to the production host, anything else ('sandbox', 'undefined') to sandbox. */
  environment?: string;
}

/** One mobile push for one device (send: mobile_push + options.apn / options.fcm / options.push). */
export interface MobilePushMessage {
  title: string;
  message: string;
  /** options.push.customData: at most 3 string pairs, in both APN and FCM payloads. */
  customData?: Record<string, string>;
  apn?: { expiry?: number; priority?: number; collapseId?: string; threadId?: string; badge?: number; sound?: string; contentAvailable?: boolean };
  fcm?: { android?: { collapseKey?: string; priority?: 'high' | 'normal'; ttl?: number; restrictedPackageName?: string } };
  /**
   * The same for every attempt of one delivery (its trackingId), so that a device shows once a
   * push that went out twice (an attempt whose answer never came, a run again after a crash):
   * APNs' apns-collapse-id (unless the send set its own), FCM's android.notification.tag and
   * apns-collapse-id. Nothing marks a duplicate otherwise: delivery is at least once.
   */
  dedupeKey?: string;
  /**
   * Where apn.expiry and fcm.android.ttl start counting: the send, not this attempt. Absent,
   * they count from now (a provider called outside a delivery).
   */
  lifetimeStart?: PushLifetimeStart;
}

export interface PushScope {
  accountId: string;
  envId: string;
}

/** What a provider answers for one device. */
export interface PushSendResult extends DeliveryResult {
  /**
   * APNs accepted the token only at the gateway of the other environment than the token names
   * (a development build's token filed as production, or the reverse): the environment it
   * belongs to, for the caller to store so the next push goes there first.
   */
  tokenEnvironment?: 'production' | 'sandbox';
}

/**
 * One provider per token type. Throws DeliveryError: `recipientInvalid: true` for a token the
 * provider says is gone (APNs BadDeviceToken/Unregistered, FCM UNREGISTERED/INVALID_ARGUMENT),
 * so the caller removes it from the user; `retryable` for transient failures;
 * code NOT_CONFIGURED when the environment has no credentials for this provider.
 */
export interface MobilePushProvider {
  send(scope: PushScope, token: PushToken, message: MobilePushMessage): Promise<PushSendResult>;
  close(): Promise<void>;
}

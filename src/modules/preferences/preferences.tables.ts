import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { DeliveryOption } from '../types/delivery-options.js';

/**
 * A user's delivery option for one notification type (or one sub-notification of it) on one
 * channel (migrations 0072 and 0077).
 */
export interface UserPreferencesTable {
  env_id: string;
  user_id: string;
  notification_id: string;
  /** '' for the type itself; otherwise the sub-notification (a send's subNotificationId) it applies to. */
  sub_notification_id: string;
  /** Log form of the channel: email, sms, inapp, mobile_push, web_push, call, slack. */
  channel: string;
  account_id: string;
  delivery: PreferenceDelivery;
  /** What set it: `unsubscribe` (List-Unsubscribe or the unsubscribe page), `api` (server credentials), `user` (the in-app client). */
  source: PreferenceSource;
  created_at: string;
  updated_at: string;
}

/** The delivery options a preference may hold: off, instant and the digests (hourly, daily, weekly, monthly). */
export type PreferenceDelivery = DeliveryOption;
export type PreferenceSource = 'unsubscribe' | 'api' | 'user';

export type PreferencesTables = { user_preferences: UserPreferencesTable };
export type PreferencesDb = Kysely<CoreTables & PreferencesTables>;

/** A sub-notification of a type with its title (migration 0080); its preferences are user_preferences rows with its id. */
export interface SubNotificationsTable {
  env_id: string;
  notification_id: string;
  sub_notification_id: string;
  account_id: string;
  title: string;
  created_at: string;
  updated_at: string;
}

import type { Kysely } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';

/** A user's delivery option for one notification type on one channel (migration 0072). */
export interface UserPreferencesTable {
  env_id: string;
  user_id: string;
  notification_id: string;
  /** Log form of the channel: email, sms, inapp, mobile_push, web_push, call, slack. */
  channel: string;
  account_id: string;
  /** `off` turns the channel off for the type; issue 13 adds the others. */
  delivery: PreferenceDelivery;
  /** What set it: `unsubscribe` (List-Unsubscribe or the unsubscribe page), later `api` and `user`. */
  source: string;
  created_at: string;
  updated_at: string;
}

export type PreferenceDelivery = 'off' | 'instant';

export type PreferencesTables = { user_preferences: UserPreferencesTable };
export type PreferencesDb = Kysely<CoreTables & PreferencesTables>;

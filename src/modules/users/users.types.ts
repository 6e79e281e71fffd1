import type { Channel } from '../../http/schemas.js';

/** The wire shapes of the spec's User (and of the pingram SDK's models). */

export type PropertyValue = string | number | boolean;
export type Properties = Record<string, PropertyValue>;

export interface PushDevice {
  device_id: string;
  app_id?: string;
  ad_id?: string;
  platform?: string;
  manufacturer?: string;
  model?: string;
}

export interface PushToken {
  type: 'FCM' | 'APN';
  token: string;
  device: PushDevice;
  /** `production`, or `sandbox`/`undefined` (the string) for APNs development builds. */
  environment: string;
}

export interface WebPushToken {
  sub: { endpoint: string; keys: { p256dh: string; auth: string } };
}

/** The OAuth v2 access response of the chat workspace, stored as given. */
export type SlackToken = { ok?: boolean; access_token?: string } & Record<string, unknown>;

export interface Suppression {
  reason: string;
  details: Record<string, unknown>;
  /** ISO time the suppression was recorded. */
  at: string;
}

export type Suppressions = Partial<Record<Channel, Suppression>>;

export interface User {
  id: string;
  email?: string;
  number?: string;
  pushTokens?: PushToken[];
  webPushTokens?: WebPushToken[];
  timezone?: string;
  slackChannel?: string;
  slackToken?: SlackToken;
  properties?: Properties;
  lastSeenTime: string;
  createdAt: string;
  updatedAt: string;
  emailSuppressionStatus?: { reason: string; details: Record<string, unknown> };
}

/**
 * A validated identify: absent keys are preserved, null clears a field. In `properties`, a key
 * set to null deletes that key; other keys are shallow-merged into the stored ones.
 */
export interface IdentifyPatch {
  email?: string | null;
  number?: string | null;
  pushTokens?: PushToken[] | null;
  webPushTokens?: WebPushToken[] | null;
  timezone?: string | null;
  slackChannel?: string | null;
  slackToken?: SlackToken | null;
  properties?: Record<string, PropertyValue | null>;
}

export interface UserPage {
  users: User[];
  hasMore: boolean;
  /** Cursor of the next page; present only when hasMore. */
  lastEvaluatedKey?: string;
}

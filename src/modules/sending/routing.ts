import type { Channel } from '../../http/schemas.js';
import { SEND_CHANNELS, type SendChannel, logNameOf } from './channels.js';

/** Why a channel was not used; recorded as `<channel>_routing_reason`. */
export type SkipReason =
  | 'NOT_IN_FORCE_CHANNELS'
  | 'NO_CONTENT'
  | 'NOTIFICATION_DISABLED'
  | 'CHANNEL_NOT_CONFIGURED_FOR_TYPE'
  | 'NO_EMAIL'
  | 'NO_NUMBER'
  | 'NO_PUSH_TOKENS'
  | 'NO_WEB_PUSH_SUBSCRIPTION'
  | 'NO_SLACK_DESTINATION'
  | 'USER_SUPPRESSED'
  | 'USER_UNSUBSCRIBED'
  | 'OFF_BY_DEFAULT'
  | 'DISABLED_FOR_ENVIRONMENT'
  | 'CHANNEL_UNAVAILABLE'
  // options.email.condition evaluated false (email-condition.ts).
  | 'CONDITION_NOT_MET'
  // The whole send, after routing (send-gates.ts): within the type's deduplication window, or over its throttle.
  | 'DEDUPLICATED'
  | 'THROTTLED';

export type RoutingDecision = { channel: SendChannel; routing: 'SEND' } | { channel: SendChannel; routing: 'SKIP'; reason: SkipReason };

export interface RoutingInput {
  forceChannels?: Channel[];
  /** Channels for which inline content or a template exists. */
  withContent: ReadonlySet<SendChannel>;
  type: { enabled: boolean; channels: readonly Channel[] };
  user: {
    email?: string | null;
    number?: string | null;
    pushTokens?: unknown[] | null;
    webPushTokens?: unknown[] | null;
    slackChannel?: string | null;
    /** Channels the user is suppressed on (e.g. EMAIL after a hard bounce, SMS after STOP). */
    suppressed: ReadonlySet<string>;
    /**
     * Log channels (email, sms, ...) the user turned off for this notification type or its
     * sub-notification (preferences, unsubscribe): never overridden, forceChannels included.
     */
    off?: ReadonlySet<string>;
    /** Log channels off by the type's defaultDeliveryOption, the user having picked nothing: forceChannels bypasses it. */
    offByDefault?: ReadonlySet<string>;
  };
  disabledForEnvironment: readonly Channel[];
  /** Channels this server can deliver now (a provider or the local development carrier exists). */
  available: ReadonlySet<SendChannel>;
}

const contact: Record<SendChannel, (u: RoutingInput['user']) => SkipReason | null> = {
  EMAIL: (u) => (u.email ? null : 'NO_EMAIL'),
  INAPP_WEB: () => null,
  SMS: (u) => (u.number ? null : 'NO_NUMBER'),
  CALL: (u) => (u.number ? null : 'NO_NUMBER'),
  PUSH: (u) => (u.pushTokens?.length ? null : 'NO_PUSH_TOKENS'),
  WEB_PUSH: (u) => (u.webPushTokens?.length ? null : 'NO_WEB_PUSH_SUBSCRIPTION'),
  SLACK: (u) => (u.slackChannel ? null : 'NO_SLACK_DESTINATION'),
};

/**
 * Decides, for every channel, whether this send uses it or why not. Content and reachability
 * choose the channels; forceChannels narrows them and bypasses the type's channel configuration
 * (its channels and its default delivery option), never the user's own opt-out.
 */
export function routeChannels(input: RoutingInput): RoutingDecision[] {
  const forced = input.forceChannels?.length ? new Set<string>(input.forceChannels) : null;
  return SEND_CHANNELS.map(({ channel }): RoutingDecision => {
    const skip = (reason: SkipReason): RoutingDecision => ({ channel, routing: 'SKIP', reason });
    if (forced && !forced.has(channel)) return skip('NOT_IN_FORCE_CHANNELS');
    if (!input.withContent.has(channel)) return skip('NO_CONTENT');
    if (!forced) {
      if (!input.type.enabled) return skip('NOTIFICATION_DISABLED');
      if (!input.type.channels.includes(channel)) return skip('CHANNEL_NOT_CONFIGURED_FOR_TYPE');
      if (input.user.offByDefault?.has(logNameOf(channel))) return skip('OFF_BY_DEFAULT');
    }
    const unreachable = contact[channel](input.user);
    if (unreachable) return skip(unreachable);
    if (input.user.suppressed.has(channel)) return skip('USER_SUPPRESSED');
    // forceChannels does not override it: the user asked for none of this type on this channel.
    // No type is exempt: the interface marks no type as transactional (docs/preferences.md).
    if (input.user.off?.has(logNameOf(channel))) return skip('USER_UNSUBSCRIBED');
    if (input.disabledForEnvironment.includes(channel)) return skip('DISABLED_FOR_ENVIRONMENT');
    if (!input.available.has(channel)) return skip('CHANNEL_UNAVAILABLE');
    return { channel, routing: 'SEND' };
  });
}

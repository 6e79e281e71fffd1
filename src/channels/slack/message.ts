import { DeliveryError } from '../types.js';

/** Template-shaped Slack content (template fields), rendered. */
export interface SlackContent {
  text?: string;
  blocks?: Record<string, unknown>[];
  username?: string;
  /** `:emoji:` or an http(s) image URL. */
  icon?: string;
}

/** The per-send options of the `slack` body that are not template fields. */
export interface SlackPostOptions {
  thread_ts?: string;
  reply_broadcast?: boolean;
  parse?: 'full' | 'none';
  link_names?: boolean;
  mrkdwn?: boolean;
  unfurl_links?: boolean;
  unfurl_media?: boolean;
  metadata?: Record<string, unknown>;
}

/** The spec's defaults, sent explicitly: Slack's own defaults differ (it does not unfurl text links for apps). */
export const SLACK_DEFAULTS = {
  reply_broadcast: false,
  parse: 'none',
  link_names: false,
  mrkdwn: true,
  unfurl_links: true,
  unfurl_media: true,
} as const;

/** `:rocket:` -> icon_emoji, `https://...` -> icon_url; a bare emoji name (`rocket`) gets its colons. */
export function iconArgs(icon: string | undefined): { icon_emoji?: string; icon_url?: string } {
  const value = icon?.trim();
  if (!value) return {};
  if (/^https?:\/\//i.test(value)) return { icon_url: value };
  if (/^:[^:\s]+:$/.test(value)) return { icon_emoji: value };
  if (/^[\w+'-]+$/.test(value)) return { icon_emoji: `:${value}:` };
  return {};
}

/** Which delivery a posted message is: carried in its metadata, so a retry can find it in the conversation. */
export interface SlackDeliveryMark {
  trackingId: string;
  /** The delivery's id, the same on every attempt. */
  deliveryId: string;
}

/** The metadata `event_type` of the messages Clarion posts (Slack: alphanumeric, human readable). */
export const DELIVERY_EVENT_TYPE = 'clarion_delivery';

/** Slack message metadata naming the delivery; invisible to people, returned by conversations.history. */
export function deliveryMetadata(mark: SlackDeliveryMark): { event_type: string; event_payload: Record<string, string> } {
  return { event_type: DELIVERY_EVENT_TYPE, event_payload: { tracking_id: mark.trackingId, delivery_id: mark.deliveryId } };
}

/**
 * Arguments of chat.postMessage for one destination channel (id, `#name`, or a DM channel id).
 * `mark` becomes the message's metadata, unless the send brings its own (a message carries one
 * metadata object, and the sender's is kept as given).
 */
export function postMessageArgs(channel: string, content: SlackContent, options: SlackPostOptions = {}, mark?: SlackDeliveryMark): Record<string, unknown> {
  const text = typeof content.text === 'string' ? content.text : '';
  const blocks = Array.isArray(content.blocks) && content.blocks.length > 0 ? content.blocks : undefined;
  if (!text.trim() && !blocks) throw new DeliveryError('no_text', 'the Slack message has neither text nor blocks', { retryable: false });
  const args: Record<string, unknown> = {
    channel,
    text,
    ...(blocks ? { blocks } : {}),
    ...(content.username ? { username: content.username } : {}),
    ...iconArgs(content.icon),
    ...(options.thread_ts ? { thread_ts: options.thread_ts } : {}),
    reply_broadcast: options.reply_broadcast ?? SLACK_DEFAULTS.reply_broadcast,
    parse: options.parse ?? SLACK_DEFAULTS.parse,
    link_names: options.link_names ?? SLACK_DEFAULTS.link_names,
    mrkdwn: options.mrkdwn ?? SLACK_DEFAULTS.mrkdwn,
    unfurl_links: options.unfurl_links ?? SLACK_DEFAULTS.unfurl_links,
    unfurl_media: options.unfurl_media ?? SLACK_DEFAULTS.unfurl_media,
    ...(options.metadata ? { metadata: options.metadata } : mark ? { metadata: deliveryMetadata(mark) } : {}),
  };
  return args;
}

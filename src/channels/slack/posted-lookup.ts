import type { WebClient } from '@slack/web-api';
import { DeliveryError } from '../types.js';
import { toDeliveryError } from './client.js';
import { DELIVERY_EVENT_TYPE, type SlackDeliveryMark } from './message.js';

/**
 * chat.postMessage takes no idempotency key, so a post whose answer never came (a timeout, a lost
 * connection, a 5xx) may or may not be in the conversation. Before posting again, the sender
 * reads the conversation since that attempt began and looks for the message by its metadata.
 */
export interface PostedLookup {
  /** A conversation id (C, G, D), or `#name` (resolved to its id with conversations.list). */
  channel: string;
  mark: SlackDeliveryMark;
  /** When the earliest attempt whose outcome is unknown started (Clarion's clock). */
  since: Date;
  /** A reply is not in conversations.history: its thread is read with conversations.replies. */
  threadTs?: string;
}

export interface LookupLimits {
  /** Read from this long before `since`: Slack's clock and ours may differ. */
  skewMs: number;
  /** Pages read at most (of `pageSize` messages), history and channel listing alike. */
  maxPages: number;
  pageSize: number;
}

export const DEFAULT_LOOKUP_LIMITS: LookupLimits = { skewMs: 5 * 60_000, maxPages: 5, pageSize: 200 };

interface HistoryMessage {
  ts?: string;
  metadata?: { event_type?: string; event_payload?: Record<string, unknown> };
}

/**
 * The message this delivery already posted to the conversation, or null when it is not among the
 * messages read. Throws a DeliveryError when the conversation cannot be read (missing_scope
 * without channels:history / groups:history / im:history, not_in_channel, a network error): the
 * caller then posts, as it would have without the lookup.
 */
export async function findPosted(client: WebClient, lookup: PostedLookup, limits: LookupLimits = DEFAULT_LOOKUP_LIMITS): Promise<{ channel: string; ts: string } | null> {
  const channel = lookup.channel.startsWith('#') ? await channelIdOf(client, lookup.channel.slice(1), limits) : lookup.channel;
  const oldest = ((lookup.since.getTime() - limits.skewMs) / 1000).toFixed(6);
  const method = lookup.threadTs ? 'conversations.replies' : 'conversations.history';
  let cursor: string | undefined;
  for (let page = 0; page < limits.maxPages; page++) {
    const args = { channel, oldest, inclusive: true, include_all_metadata: true, limit: limits.pageSize, ...(cursor ? { cursor } : {}) };
    let res: { messages?: HistoryMessage[]; response_metadata?: { next_cursor?: string } };
    try {
      res = lookup.threadTs ? await client.conversations.replies({ ...args, ts: lookup.threadTs }) : await client.conversations.history(args);
    } catch (err) {
      throw toDeliveryError(err, method, `looking for delivery ${lookup.mark.deliveryId}`);
    }
    const found = (res.messages ?? []).find((m) => isDelivery(m, lookup.mark));
    if (found?.ts) return { channel, ts: found.ts };
    cursor = res.response_metadata?.next_cursor || undefined;
    if (!cursor) return null;
  }
  return null;
}

function isDelivery(message: HistoryMessage, mark: SlackDeliveryMark): boolean {
  return message.metadata?.event_type === DELIVERY_EVENT_TYPE && message.metadata.event_payload?.delivery_id === mark.deliveryId;
}

/** conversations.history wants an id: a `#name` destination is looked up among the conversations the token sees. */
async function channelIdOf(client: WebClient, name: string, limits: LookupLimits): Promise<string> {
  let cursor: string | undefined;
  for (let page = 0; page < limits.maxPages; page++) {
    let res: { channels?: { id?: string; name?: string }[]; response_metadata?: { next_cursor?: string } };
    try {
      res = await client.conversations.list({ types: 'public_channel,private_channel', exclude_archived: true, limit: limits.pageSize, ...(cursor ? { cursor } : {}) });
    } catch (err) {
      throw toDeliveryError(err, 'conversations.list', `looking up #${name}`);
    }
    const id = res.channels?.find((c) => c.name?.toLowerCase() === name.toLowerCase())?.id;
    if (id) return id;
    cursor = res.response_metadata?.next_cursor || undefined;
    if (!cursor) break;
  }
  throw new DeliveryError('channel_not_found', `#${name} is not among the conversations the token lists`, { retryable: true });
}

import type { WebClient } from '@slack/web-api';

/** Conversations and members as Slack's Web API returns them (kept whole: clients read their own fields). */
export type SlackObject = Record<string, unknown> & { id?: string };

export interface SlackWorkspaceListing {
  channels: SlackObject[];
  users: SlackObject[];
  /** The user the token acts for: the installing user (authed_user.id) or else the token's own user. */
  me?: SlackObject;
  hasMoreChannels: boolean;
  hasMoreUsers: boolean;
}

export interface ListingLimits {
  /** Most conversations (and, separately, members) listed; more are reported by hasMore*. */
  maxItems: number;
  /** Items asked per page (Slack recommends at most 200). */
  pageSize: number;
}

export const DEFAULT_LISTING_LIMITS: ListingLimits = { maxItems: 1000, pageSize: 200 };

/**
 * What a user picks a Slack destination from: the workspace's channels (public and private ones
 * the token sees, archived left out) and its members, paged with Slack's cursors up to a bound.
 * Errors are the WebClient's (callers map them with toDeliveryError).
 */
export async function listWorkspace(client: WebClient, meId: string | undefined, limits: ListingLimits = DEFAULT_LISTING_LIMITS): Promise<SlackWorkspaceListing> {
  const channels = await collect(limits, async (cursor, limit) => {
    const page = await client.conversations.list({ types: 'public_channel,private_channel', exclude_archived: true, limit, ...(cursor ? { cursor } : {}) });
    return { items: (page.channels ?? []) as SlackObject[], next: page.response_metadata?.next_cursor };
  });
  const users = await collect(limits, async (cursor, limit) => {
    const page = await client.users.list({ limit, ...(cursor ? { cursor } : {}) });
    return { items: (page.members ?? []) as SlackObject[], next: page.response_metadata?.next_cursor };
  });
  const myId = meId ?? (await client.auth.test()).user_id;
  let me = myId ? users.items.find((u) => u.id === myId) : undefined;
  if (!me && myId) me = (await client.users.info({ user: myId })).user as SlackObject | undefined;
  return { channels: channels.items, users: users.items, ...(me ? { me } : {}), hasMoreChannels: channels.more, hasMoreUsers: users.more };
}

async function collect(
  limits: ListingLimits,
  fetchPage: (cursor: string | undefined, limit: number) => Promise<{ items: SlackObject[]; next?: string }>,
): Promise<{ items: SlackObject[]; more: boolean }> {
  const items: SlackObject[] = [];
  let cursor: string | undefined;
  do {
    const page = await fetchPage(cursor, Math.min(limits.pageSize, limits.maxItems - items.length));
    items.push(...page.items);
    cursor = page.next || undefined;
  } while (cursor && items.length < limits.maxItems);
  return { items: items.slice(0, limits.maxItems), more: Boolean(cursor) || items.length > limits.maxItems };
}

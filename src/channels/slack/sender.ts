import type { ChatPostMessageArguments, WebClient } from '@slack/web-api';
import type { Clock } from '../../deps.js';
import { sha256Hex } from '../../secrets.js';
import { DeliveryError } from '../types.js';
import type { SlackClients } from './client.js';
import { toDeliveryError } from './client.js';
import { type SlackDestination, type SlackMember, memberMatch, parseSlackDestination } from './destination.js';
import { type SlackContent, type SlackDeliveryMark, type SlackPostOptions, postMessageArgs } from './message.js';
import { DEFAULT_LOOKUP_LIMITS, type LookupLimits, findPosted } from './posted-lookup.js';

export interface SlackPostInput {
  token: string;
  /** The user's slackChannel, in any of its forms. */
  destination: string;
  content: SlackContent;
  options?: SlackPostOptions;
  /** The delivery this post is, put in the message's metadata (unless `options.metadata` is given). */
  mark?: SlackDeliveryMark;
  /**
   * When an earlier attempt of this delivery whose outcome is unknown started: the conversation is
   * read for the marked message first, and a message found is the result instead of a new post.
   */
  unknownOutcomeSince?: Date;
}

export interface SlackPostResult {
  /** The conversation id Slack posted to. */
  channel: string;
  ts: string;
  /** How the destination was reached, for the log. */
  resolvedVia: SlackDestination['kind'];
  /** What the look for an earlier attempt's message gave, when one was made. */
  recheck?: { found: true } | { found: false; failed?: DeliveryError };
}

/** users.list pages read at most when looking up an @handle (200 members each). */
const MAX_USER_PAGES = 100;
const MAX_CACHE_ENTRIES = 10_000;

/**
 * Posts one message with chat.postMessage to a user's Slack destination. Direct-message
 * destinations (a user id, an @handle) are opened with conversations.open first; those
 * resolutions are cached per token for `cacheTtlMs`, and a cached conversation that Slack no
 * longer knows is resolved again once.
 */
export class SlackSender {
  private readonly cache = new Map<string, { channel: string; expires: number }>();

  constructor(
    private readonly clients: SlackClients,
    private readonly clock: Clock,
    private readonly cacheTtlMs = 10 * 60_000,
    private readonly lookupLimits: LookupLimits = DEFAULT_LOOKUP_LIMITS,
  ) {}

  async post(input: SlackPostInput): Promise<SlackPostResult> {
    const destination = parseSlackDestination(input.destination);
    const client = this.clients.for(input.token);
    const cacheKey = `${sha256Hex(input.token).slice(0, 24)}|${input.destination.trim()}`;
    const cached = this.cached(cacheKey);
    const channel = cached ?? (await this.resolve(client, destination, cacheKey));
    try {
      return await this.postTo(client, channel, input, destination);
    } catch (err) {
      if (!(cached && err instanceof DeliveryError && err.code === 'channel_not_found')) throw err;
      this.cache.delete(cacheKey);
      return this.postTo(client, await this.resolve(client, destination, cacheKey), input, destination);
    }
  }

  private async postTo(client: WebClient, channel: string, input: SlackPostInput, destination: SlackDestination): Promise<SlackPostResult> {
    const recheck = await this.recheck(client, channel, input);
    if (recheck?.posted) return { ...recheck.posted, resolvedVia: destination.kind, recheck: { found: true } };
    const posted = await this.postMessage(client, channel, input, destination);
    return recheck ? { ...posted, recheck: { found: false, ...(recheck.failed ? { failed: recheck.failed } : {}) } } : posted;
  }

  /**
   * Looks for the message of an attempt whose outcome is unknown. The look failing (the token
   * lacks the history scopes, the app is not in the channel, Slack unreachable) is no reason to
   * withhold the message: the caller posts, as it did before the look existed.
   */
  private async recheck(client: WebClient, channel: string, input: SlackPostInput): Promise<{ posted?: { channel: string; ts: string }; failed?: DeliveryError } | undefined> {
    // The sender's own metadata replaces the mark: nothing to look for.
    if (!input.unknownOutcomeSince || !input.mark || input.options?.metadata) return undefined;
    try {
      const posted = await findPosted(client, { channel, mark: input.mark, since: input.unknownOutcomeSince, ...(input.options?.thread_ts ? { threadTs: input.options.thread_ts } : {}) }, this.lookupLimits);
      return posted ? { posted } : {};
    } catch (err) {
      return { failed: err instanceof DeliveryError ? err : new DeliveryError('SLACK_REQUEST_FAILED', String(err), { retryable: true }) };
    }
  }

  private async postMessage(client: WebClient, channel: string, input: SlackPostInput, destination: SlackDestination): Promise<SlackPostResult> {
    const args = postMessageArgs(channel, input.content, input.options, input.mark);
    let res: { channel?: string; ts?: string };
    try {
      res = await client.chat.postMessage(args as unknown as ChatPostMessageArguments);
    } catch (err) {
      throw toDeliveryError(err, 'chat.postMessage', `destination ${input.destination.trim()}`);
    }
    if (!res.ts) throw new DeliveryError('SLACK_BAD_RESPONSE', 'chat.postMessage answered ok without a message ts', { retryable: true });
    return { channel: res.channel ?? channel, ts: res.ts, resolvedVia: destination.kind };
  }

  /** The `channel` argument of chat.postMessage for a destination. */
  private async resolve(client: WebClient, destination: SlackDestination, cacheKey: string): Promise<string> {
    switch (destination.kind) {
      case 'channel_id':
        return destination.id;
      case 'channel_name':
        return `#${destination.name}`;
      case 'user_id': {
        const channel = await this.openDm(client, destination.id);
        this.remember(cacheKey, channel);
        return channel;
      }
      case 'username': {
        const channel = await this.openDm(client, await this.findUser(client, destination.name));
        this.remember(cacheKey, channel);
        return channel;
      }
    }
  }

  private async openDm(client: WebClient, userId: string): Promise<string> {
    let res: { channel?: { id?: string } };
    try {
      res = await client.conversations.open({ users: userId });
    } catch (err) {
      throw toDeliveryError(err, 'conversations.open', `user ${userId}`);
    }
    const id = res.channel?.id;
    if (!id) throw new DeliveryError('SLACK_BAD_RESPONSE', 'conversations.open answered ok without a channel id', { retryable: true });
    return id;
  }

  /** Walks users.list; a username match wins at once, else the first display-name match. */
  private async findUser(client: WebClient, handle: string): Promise<string> {
    let cursor: string | undefined;
    let byDisplayName: string | undefined;
    for (let page = 0; page < MAX_USER_PAGES; page++) {
      let res: { members?: SlackMember[]; response_metadata?: { next_cursor?: string } };
      try {
        res = await client.users.list({ limit: 200, ...(cursor ? { cursor } : {}) });
      } catch (err) {
        throw toDeliveryError(err, 'users.list', `looking up @${handle}`);
      }
      for (const member of res.members ?? []) {
        const match = memberMatch(member, handle);
        if (match === 2) return member.id!;
        if (match === 1 && !byDisplayName) byDisplayName = member.id;
      }
      cursor = res.response_metadata?.next_cursor || undefined;
      if (!cursor) break;
    }
    if (byDisplayName) return byDisplayName;
    throw new DeliveryError('user_not_found', `no Slack user named @${handle} in the workspace`, { retryable: false, providerCode: 'user_not_found' });
  }

  private cached(key: string): string | undefined {
    const entry = this.cache.get(key);
    if (!entry) return undefined;
    if (entry.expires <= this.clock.now().getTime()) {
      this.cache.delete(key);
      return undefined;
    }
    return entry.channel;
  }

  private remember(key: string, channel: string): void {
    this.cache.delete(key);
    this.cache.set(key, { channel, expires: this.clock.now().getTime() + this.cacheTtlMs });
    if (this.cache.size > MAX_CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value as string);
  }
}

import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SlackClients, outcomeUnknown } from '../../src/channels/slack/client.js';
import { parseSlackDestination } from '../../src/channels/slack/destination.js';
import { SlackSender } from '../../src/channels/slack/sender.js';
import { DeliveryError } from '../../src/channels/types.js';
import { ManualClock } from '../helpers/context.js';
import { type SlackPeer, startSlackPeer } from '../helpers/slack-peer.js';

const TOKEN = 'xoxb-1111-2222-peertoken';
const OTHER = 'xoxb-9999-8888-otherspace';

const DEFAULTS = { reply_broadcast: 'false', parse: 'none', link_names: 'false', mrkdwn: 'true', unfurl_links: 'true', unfurl_media: 'true' };

describe('Slack channel over the Web API (chat.postMessage against a local Slack peer)', () => {
  let peer: SlackPeer;
  let clock: ManualClock;
  let sender: SlackSender;
  const logger = pino({ level: 'silent' });

  beforeAll(async () => {
    peer = await startSlackPeer({
      tokens: [TOKEN, OTHER],
      channels: [
        { id: 'C0GENERAL', name: 'general' },
        { id: 'G0SECRET', name: 'secret' },
        { id: 'C0OUTSIDE', name: 'outside', notMember: true },
      ],
      users: [
        { id: 'U0ADA', name: 'ada', display_name: 'Ada L' },
        { id: 'U0GONE', name: 'gone', deleted: true },
        { id: 'W0GRACE', name: 'grace', display_name: 'Admiral' },
        { id: 'U0BOB', name: 'bob', display_name: 'linus' },
        { id: 'U0LIN', name: 'lin.k', display_name: 'Lin' },
      ],
      maxPageSize: 2,
      now: () => clock.now().getTime(),
    });
  });
  afterAll(() => peer.close());
  beforeEach(() => {
    peer.reset();
    clock = new ManualClock();
    sender = new SlackSender(new SlackClients({ apiUrl: peer.url, logger }), clock, 60_000);
  });

  const post = (destination: string, content: Record<string, unknown> = { text: 'hello' }, options: Record<string, unknown> = {}, token = TOKEN) =>
    sender.post({ token, destination, content, options });
  const failure = async (promise: Promise<unknown>): Promise<DeliveryError> => {
    const err = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DeliveryError);
    return err as DeliveryError;
  };

  describe('destinations', () => {
    it('posts to a channel by name, with or without #, as #name', async () => {
      const a = await post('general');
      const b = await post('#general');
      expect(a).toMatchObject({ channel: 'C0GENERAL', resolvedVia: 'channel_name' });
      expect(b.channel).toBe('C0GENERAL');
      expect(a.ts).not.toBe(b.ts);
      expect(peer.callsOf('chat.postMessage').map((c) => c.args.channel)).toEqual(['#general', '#general']);
      expect(peer.callsOf('conversations.open')).toHaveLength(0);
      // The WebClient's way: the token in the Authorization header only, a form body.
      for (const call of peer.calls) {
        expect(call).toMatchObject({ token: TOKEN, tokenIn: 'header' });
        expect(call.contentType).toContain('application/x-www-form-urlencoded');
        expect(call.args).not.toHaveProperty('token');
      }
    });

    it('posts to a channel id (public C…, private G…) as is', async () => {
      expect((await post('C0GENERAL')).channel).toBe('C0GENERAL');
      expect((await post('G0SECRET')).channel).toBe('G0SECRET');
      expect(peer.callsOf('chat.postMessage').map((c) => c.args.channel)).toEqual(['C0GENERAL', 'G0SECRET']);
      expect(peer.callsOf('conversations.open')).toHaveLength(0);
    });

    it('opens a direct message for a user id (U… and W…) and posts to the returned conversation', async () => {
      const ada = await post('U0ADA');
      const grace = await post('W0GRACE');
      expect(peer.callsOf('conversations.open').map((c) => c.args)).toEqual([{ users: 'U0ADA' }, { users: 'W0GRACE' }]);
      expect(ada).toMatchObject({ channel: 'D0ADAX', resolvedVia: 'user_id' });
      expect(grace.channel).toBe('D0GRACEX');
      expect(peer.callsOf('chat.postMessage').map((c) => c.args.channel)).toEqual(['D0ADAX', 'D0GRACEX']);
      // conversations.open comes first each time.
      expect(peer.calls.map((c) => c.method)).toEqual(['conversations.open', 'chat.postMessage', 'conversations.open', 'chat.postMessage']);
    });

    it('resolves @username through every users.list page, then opens a direct message', async () => {
      const result = await post('@lin.k');
      const pages = peer.callsOf('users.list');
      // 5 members, pages of 2: the third page holds lin.k.
      expect(pages).toHaveLength(3);
      expect(pages[0].args).toEqual({ limit: '200' });
      expect(pages[1].args.cursor).toEqual(expect.any(String));
      expect(pages[2].args.cursor).not.toBe(pages[1].args.cursor);
      expect(peer.callsOf('conversations.open').map((c) => c.args)).toEqual([{ users: 'U0LIN' }]);
      expect(result).toMatchObject({ channel: 'D0LINX', resolvedVia: 'username' });
    });

    it('matches a display name when no username matches, case-insensitively; a username match wins over a display name', async () => {
      expect((await post('@admiral')).channel).toBe('D0GRACEX');
      // "lin" is only U0LIN's display name; "linus" is U0BOB's display name.
      expect((await post('@Linus')).channel).toBe('D0BOBX');
      expect(peer.callsOf('conversations.open').map((c) => c.args.users)).toEqual(['W0GRACE', 'U0BOB']);
    });

    it('fails permanently with user_not_found for an unknown or deleted @username, posting nothing', async () => {
      for (const handle of ['@nobody', '@gone']) {
        const err = await failure(post(handle));
        expect(err.code).toBe('user_not_found');
        expect(err.retryable).toBe(false);
      }
      expect(peer.callsOf('chat.postMessage')).toHaveLength(0);
    });

    it('caches direct-message resolutions per token for a while', async () => {
      await post('@ada');
      await post('@ada');
      await post('U0ADA');
      await post('U0ADA');
      expect(peer.callsOf('users.list')).toHaveLength(1);
      expect(peer.callsOf('conversations.open')).toHaveLength(2);
      // Another workspace's token resolves on its own.
      await post('U0ADA', { text: 'x' }, {}, OTHER);
      expect(peer.callsOf('conversations.open')).toHaveLength(3);
      clock.advance(60_001);
      await post('@ada');
      expect(peer.callsOf('users.list')).toHaveLength(2);
      expect(peer.callsOf('chat.postMessage')).toHaveLength(6);
    });

    it('resolves again once when a cached conversation is no longer found', async () => {
      await post('U0ADA');
      peer.fail('chat.postMessage', { error: 'channel_not_found' });
      const result = await post('U0ADA');
      expect(result.channel).toBe('D0ADAX');
      expect(peer.callsOf('conversations.open')).toHaveLength(2);
      expect(peer.callsOf('chat.postMessage')).toHaveLength(3);
    });

    it('parses each slackChannel form', () => {
      expect(parseSlackDestination(' #general ')).toEqual({ kind: 'channel_name', name: 'general' });
      expect(parseSlackDestination('alerts-prod')).toEqual({ kind: 'channel_name', name: 'alerts-prod' });
      expect(parseSlackDestination('D024BE91L')).toEqual({ kind: 'channel_id', id: 'D024BE91L' });
      expect(parseSlackDestination('W012A3CDE')).toEqual({ kind: 'user_id', id: 'W012A3CDE' });
      expect(parseSlackDestination('@ada')).toEqual({ kind: 'username', name: 'ada' });
      for (const bad of ['', '  ', '#', '@']) expect(() => parseSlackDestination(bad)).toThrow(DeliveryError);
    });
  });

  describe('message options', () => {
    it('sends the spec defaults explicitly when only text is given', async () => {
      await post('#general', { text: 'plain' });
      expect(peer.callsOf('chat.postMessage')[0].args).toEqual({ channel: '#general', text: 'plain', ...DEFAULTS });
    });

    it('passes every option exactly', async () => {
      const blocks = [
        { type: 'section', text: { type: 'mrkdwn', text: '*Deploy* finished' } },
        { type: 'context', elements: [{ type: 'plain_text', text: 'prod' }] },
      ];
      const metadata = {
        event_type: 'deploy_finished',
        event_payload: { id: 42, env: 'prod' },
        entities: [{ entity_type: 'slack#/entities/task', entity_payload: { title: 'x' }, external_ref: { id: 'T-1', type: 'task' }, url: 'https://example.com/t/1' }],
      };
      await post(
        'C0GENERAL',
        { text: 'Deploy finished', blocks, username: 'Deploy bot', icon: ':rocket:' },
        { thread_ts: '1700000000.000100', reply_broadcast: true, parse: 'full', link_names: true, mrkdwn: false, unfurl_links: false, unfurl_media: false, metadata },
      );
      const args = peer.callsOf('chat.postMessage')[0].args;
      expect(args).toEqual({
        channel: 'C0GENERAL',
        text: 'Deploy finished',
        blocks: JSON.stringify(blocks),
        username: 'Deploy bot',
        icon_emoji: ':rocket:',
        thread_ts: '1700000000.000100',
        reply_broadcast: 'true',
        parse: 'full',
        link_names: 'true',
        mrkdwn: 'false',
        unfurl_links: 'false',
        unfurl_media: 'false',
        metadata: JSON.stringify(metadata),
      });
    });

    it('maps the icon: an emoji to icon_emoji, a URL to icon_url', async () => {
      await post('#general', { text: 'a', icon: 'https://cdn.example.com/bot.png' });
      await post('#general', { text: 'b', icon: 'tada' });
      await post('#general', { text: 'c', icon: ':tada:' });
      const [url, bare, emoji] = peer.callsOf('chat.postMessage').map((c) => c.args);
      expect(url.icon_url).toBe('https://cdn.example.com/bot.png');
      expect(url).not.toHaveProperty('icon_emoji');
      expect(bare.icon_emoji).toBe(':tada:');
      expect(emoji.icon_emoji).toBe(':tada:');
      expect(emoji).not.toHaveProperty('icon_url');
    });

    it('refuses a message with neither text nor blocks before calling Slack', async () => {
      const err = await failure(post('#general', { text: '  ' }));
      expect(err).toMatchObject({ code: 'no_text', retryable: false });
      expect(peer.calls).toHaveLength(0);
    });
  });

  describe('failures', () => {
    it('channel_not_found and not_in_channel are permanent, with the destination in the message', async () => {
      const missing = await failure(post('#nope'));
      expect(missing).toMatchObject({ code: 'channel_not_found', retryable: false });
      expect(missing.message).toContain('#nope');
      const outside = await failure(post('outside'));
      expect(outside).toMatchObject({ code: 'not_in_channel', retryable: false });
    });

    it('invalid_auth for a token the workspace does not know, without the token in the message', async () => {
      const bad = 'xoxb-0000-not-a-real-token';
      const err = await failure(post('#general', { text: 'x' }, {}, bad));
      expect(err).toMatchObject({ code: 'invalid_auth', retryable: false });
      expect(err.message).not.toContain(bad);
      expect(peer.calls[0]).toMatchObject({ token: bad, tokenIn: 'header' });
    });

    it.each(['account_inactive', 'token_revoked', 'missing_scope', 'is_archived'])('%s is permanent with that code', async (code) => {
      peer.fail('chat.postMessage', { error: code });
      const err = await failure(post('#general'));
      expect(err).toMatchObject({ code, retryable: false });
      expect(err.options.providerCode).toBe(code);
    });

    it('a failed conversations.open or users.list fails the delivery with Slack\'s code', async () => {
      const unknown = await failure(post('U0NOBODY'));
      expect(unknown).toMatchObject({ code: 'user_not_found', retryable: false });
      peer.fail('users.list', { error: 'missing_scope' });
      expect(await failure(post('@ada'))).toMatchObject({ code: 'missing_scope', retryable: false });
      expect(peer.callsOf('chat.postMessage')).toHaveLength(0);
    });

    it('Slack\'s own trouble (internal_error, fatal_error) is retryable', async () => {
      peer.fail('chat.postMessage', { error: 'internal_error' });
      expect(await failure(post('#general'))).toMatchObject({ code: 'internal_error', retryable: true });
    });

    it('ratelimited (429 + Retry-After) is retryable after Retry-After, without a retry inside the client', async () => {
      peer.fail('chat.postMessage', { ratelimited: 7 });
      const err = await failure(post('#general'));
      expect(err).toMatchObject({ code: 'ratelimited', retryable: true });
      expect(err.options.retryAfterMs).toBe(7000);
      expect(peer.callsOf('chat.postMessage')).toHaveLength(1);
      // The delivery engine's retry then goes through.
      expect((await post('#general')).channel).toBe('C0GENERAL');
      expect(peer.callsOf('chat.postMessage')).toHaveLength(2);
    });

    it('rate limits while resolving are retryable too; a 429 without Retry-After falls back to the engine backoff', async () => {
      peer.fail('conversations.open', { ratelimited: 3 });
      const open = await failure(post('U0ADA'));
      expect(open).toMatchObject({ code: 'ratelimited', retryable: true });
      expect(open.options.retryAfterMs).toBe(3000);
      peer.fail('chat.postMessage', { ratelimited: null });
      const bare = await failure(post('#general'));
      expect(bare.retryable).toBe(true);
      expect(bare.options.retryAfterMs).toBeUndefined();
    });

    it('an unreachable Slack API is a retryable network error', async () => {
      const closed = await startSlackPeer({ tokens: [TOKEN] });
      const url = closed.url;
      await closed.close();
      const offline = new SlackSender(new SlackClients({ apiUrl: url, logger, timeoutMs: 2000 }), clock);
      const err = await failure(offline.post({ token: TOKEN, destination: '#general', content: { text: 'x' } }));
      expect(err).toMatchObject({ code: 'NETWORK_ERROR', retryable: true });
    });
  });

  describe('a post whose outcome is unknown is looked for before it is posted again', () => {
    const mark = { trackingId: 'trk-1', deliveryId: 'dlv-1' };
    const MARKED = { event_type: 'clarion_delivery', event_payload: { tracking_id: 'trk-1', delivery_id: 'dlv-1' } };
    // A short client timeout: the peer never answers a hung call, so the client's own timeout ends it.
    const impatient = () => new SlackSender(new SlackClients({ apiUrl: peer.url, logger, timeoutMs: 200 }), clock, 60_000);
    /** The first attempt: it times out, and its retry is due later by the injected clock. */
    const timedOut = async (s: SlackSender, destination: string, options: Record<string, unknown> = {}) => {
      const startedAt = clock.now();
      const err = await failure(s.post({ token: TOKEN, destination, content: { text: 'deploy done' }, options, mark }));
      expect(err).toMatchObject({ code: 'NETWORK_ERROR', retryable: true });
      expect(outcomeUnknown(err.options.providerCode ?? err.code)).toBe(true);
      clock.advance(90_000);
      return startedAt;
    };
    const retry = (s: SlackSender, destination: string, since: Date, options: Record<string, unknown> = {}) =>
      s.post({ token: TOKEN, destination, content: { text: 'deploy done' }, options, mark, unknownOutcomeSince: since });

    it('every marked post carries the delivery in its metadata; the sender\'s own metadata is kept instead', async () => {
      await sender.post({ token: TOKEN, destination: 'C0GENERAL', content: { text: 'a', blocks: [{ type: 'divider' }] }, mark });
      const own = { event_type: 'order_shipped', event_payload: { order: 'A-1' } };
      await sender.post({ token: TOKEN, destination: 'C0GENERAL', content: { text: 'b' }, options: { metadata: own }, mark });
      const [marked, customer] = peer.callsOf('chat.postMessage').map((c) => c.args);
      expect(JSON.parse(String(marked.metadata))).toEqual(MARKED);
      expect(marked.text).toBe('a');
      expect(marked.blocks).toBe(JSON.stringify([{ type: 'divider' }]));
      expect(JSON.parse(String(customer.metadata))).toEqual(own);
    });

    it('a timed-out post that Slack did post is found and not posted again', async () => {
      const s = impatient();
      peer.fail('chat.postMessage', { posted: true, answer: 'hang' });
      const since = await timedOut(s, 'C0GENERAL');
      const result = await retry(s, 'C0GENERAL', since);
      expect(peer.posted).toHaveLength(1);
      expect(peer.callsOf('chat.postMessage')).toHaveLength(1);
      expect(result).toMatchObject({ channel: 'C0GENERAL', ts: peer.posted[0].ts, recheck: { found: true } });
      const [lookup] = peer.callsOf('conversations.history');
      expect(lookup.args).toMatchObject({ channel: 'C0GENERAL', include_all_metadata: 'true', inclusive: 'true', oldest: ((since.getTime() - 5 * 60_000) / 1000).toFixed(6) });
    });

    it('a timed-out post that Slack did not post is posted on retry', async () => {
      const s = impatient();
      peer.fail('chat.postMessage', { posted: false, answer: 'hang' });
      const since = await timedOut(s, 'C0GENERAL');
      const result = await retry(s, 'C0GENERAL', since);
      expect(result.recheck).toEqual({ found: false });
      expect(peer.callsOf('chat.postMessage')).toHaveLength(2);
      expect(peer.posted).toHaveLength(1);
      expect(JSON.parse(String(peer.posted[0].args.metadata))).toEqual(MARKED);
    });

    it('looks past other messages, over several pages, and only before posting again', async () => {
      peer.fail('chat.postMessage', { posted: true, answer: 500 });
      const since = clock.now();
      expect(await failure(sender.post({ token: TOKEN, destination: 'C0GENERAL', content: { text: 'x' }, mark }))).toMatchObject({ code: 'HTTP_ERROR', retryable: true });
      for (const text of ['later 1', 'later 2', 'later 3', 'later 4']) await sender.post({ token: TOKEN, destination: 'C0GENERAL', content: { text }, mark: { trackingId: text, deliveryId: text } });
      const result = await retry(sender, 'C0GENERAL', since);
      expect(result).toMatchObject({ ts: peer.posted[0].ts, recheck: { found: true } });
      // The peer pages by 2, newest first: the first attempt's message is on the third page.
      expect(peer.callsOf('conversations.history')).toHaveLength(3);
      expect(peer.posted).toHaveLength(5);
    });

    it('a #name destination is looked for by its channel id; a thread reply in its thread (conversations.replies)', async () => {
      peer.fail('chat.postMessage', { posted: true, answer: 500 });
      const since = clock.now();
      await failure(sender.post({ token: TOKEN, destination: '#secret', content: { text: 'x' }, mark }));
      expect(await retry(sender, '#secret', since)).toMatchObject({ channel: 'G0SECRET', recheck: { found: true } });
      expect(peer.callsOf('conversations.history')[0].args.channel).toBe('G0SECRET');

      peer.reset();
      const parent = await sender.post({ token: TOKEN, destination: 'C0GENERAL', content: { text: 'parent' } });
      peer.fail('chat.postMessage', { posted: true, answer: 500 });
      await failure(sender.post({ token: TOKEN, destination: 'C0GENERAL', content: { text: 'reply' }, options: { thread_ts: parent.ts }, mark }));
      const found = await retry(sender, 'C0GENERAL', since, { thread_ts: parent.ts });
      expect(found).toMatchObject({ ts: peer.posted[1].ts, recheck: { found: true } });
      expect(peer.callsOf('conversations.replies')[0].args).toMatchObject({ channel: 'C0GENERAL', ts: parent.ts });
      expect(peer.posted).toHaveLength(2);
    });

    it('a lookup Slack refuses (missing_scope without the history scopes) falls back to posting again', async () => {
      peer.fail('chat.postMessage', { posted: true, answer: 500 });
      peer.fail('conversations.history', { error: 'missing_scope' });
      const since = clock.now();
      await failure(sender.post({ token: TOKEN, destination: 'C0GENERAL', content: { text: 'x' }, mark }));
      const result = await retry(sender, 'C0GENERAL', since);
      expect(result.recheck).toMatchObject({ found: false, failed: { code: 'missing_scope' } });
      expect(peer.posted).toHaveLength(2);
    });

    it('codes that posted nothing are not outcome-unknown', () => {
      for (const code of ['channel_not_found', '429', 'not_in_channel', 'invalid_auth', null]) expect(outcomeUnknown(code)).toBe(false);
      for (const code of ['NETWORK_ERROR', '500', '503', '408', 'internal_error', 'service_unavailable', 'SLACK_BAD_RESPONSE']) expect(outcomeUnknown(code)).toBe(true);
    });
  });
});

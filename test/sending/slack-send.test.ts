import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import { MessagesRepository } from '../../src/modules/sending/messages.repository.js';
import type { SendBody } from '../../src/modules/sending/sending.schemas.js';
import { unrecordedRunAttempt } from '../../src/modules/sending/unrecorded-runs.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SlackPeer, startSlackPeer } from '../helpers/slack-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const WORKSPACE_TOKEN = 'xoxb-4242-user-workspace';
const AUTHED_USER_TOKEN = 'xoxp-4242-authed-user';
const ENV_BOT_TOKEN = 'xoxb-7777-environment-bot';

describe.each(STORAGE_KINDS)('send: Slack end to end through POST /send (%s)', (kind) => {
  let t: TestContext;
  let peer: SlackPeer;
  const send = (payload: unknown) => t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: payload as object });
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
  const settled = (trackingId: string, field: string) => eventually(async () => ((await log(trackingId))?.[field] ? log(trackingId) : undefined), 15_000, field);
  const settings = (method: 'GET' | 'PUT' | 'DELETE', payload?: object) => t.app.inject({ method, url: '/settings/slack', headers: t.auth, ...(payload ? { payload } : {}) });

  beforeAll(async () => {
    peer = await startSlackPeer({
      tokens: [WORKSPACE_TOKEN, AUTHED_USER_TOKEN, ENV_BOT_TOKEN],
      channels: [{ id: 'C0GENERAL', name: 'general' }],
      users: [
        { id: 'U0ADA', name: 'ada', display_name: 'Ada' },
        { id: 'U0GRACE', name: 'grace' },
        { id: 'U0LIN', name: 'lin' },
      ],
      team: { id: 'T0ACME', name: 'Acme' },
    });
    t = await createTestContext(kind, { workers: true, config: { slackApiUrl: peer.url } });
  });
  afterAll(async () => {
    await t?.close();
    await peer?.close();
  });
  beforeEach(() => peer.reset());
  const slackDeliveryId = async (trackingId: string) =>
    (await sql<{ id: string }>`select id from deliveries where tracking_id = ${trackingId} and routing = 'SEND'`.execute(t.deps.db)).rows[0].id;
  const attemptsOf = async (trackingId: string) =>
    (
      await sql<{ outcome: string; provider_code: string | null; detail: string | null }>`
      select a.outcome, a.provider_code, a.detail from delivery_attempts a join deliveries d on d.id = a.delivery_id
      where d.tracking_id = ${trackingId} order by a.attempt`.execute(t.deps.db)
    ).rows;

  it("delivers inline Slack content with the user's token; every option reaches chat.postMessage; the log tells sent and delivered", async () => {
    const blocks = [{ type: 'section', text: { type: 'mrkdwn', text: 'Hello *{{ name }}*' } }];
    const metadata = { event_type: 'order_shipped', event_payload: { order: 'A-1' } };
    const res = await send({
      type: 'shipping',
      to: { id: 'ada', slackChannel: '#general', slackToken: { ok: true, access_token: WORKSPACE_TOKEN, token_type: 'bot', team: { id: 'T0ACME', name: 'Acme' } } },
      parameters: { name: 'Ada' },
      slack: {
        text: 'Order for {{ name }} shipped',
        blocks,
        username: 'Shipping {{ name }}',
        icon: 'https://cdn.example.com/truck.png',
        thread_ts: '1700000000.000200',
        reply_broadcast: true,
        parse: 'full',
        link_names: true,
        mrkdwn: false,
        unfurl_links: false,
        unfurl_media: false,
        metadata,
      },
    });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json();
    const [post] = await peer.waitForPosts(1);
    expect(post.token).toBe(WORKSPACE_TOKEN);
    expect(post.args).toEqual({
      channel: '#general',
      text: 'Order for Ada shipped',
      blocks: JSON.stringify([{ type: 'section', text: { type: 'mrkdwn', text: 'Hello *Ada*' } }]),
      username: 'Shipping Ada',
      icon_url: 'https://cdn.example.com/truck.png',
      thread_ts: '1700000000.000200',
      reply_broadcast: 'true',
      parse: 'full',
      link_names: 'true',
      mrkdwn: 'false',
      unfurl_links: 'false',
      unfurl_media: 'false',
      metadata: JSON.stringify(metadata),
    });

    const record = await settled(trackingId, 'slack_delivered_at');
    expect(record).toMatchObject({
      trackingId,
      user_id: 'ada',
      slack_routing: 'SEND',
      slack_preview: 'Order for Ada shipped',
      slack_sent_at: expect.any(String),
      slack_delivered_at: expect.any(String),
      email_routing: 'SKIP',
    });
    expect(JSON.parse(record.slack_delivered_internal)).toEqual({ channel: 'C0GENERAL', ts: post.ts });
    expect(record.slack_sent_after).toBeGreaterThanOrEqual(0);
    expect(record.slack_delivered_after).toBeGreaterThanOrEqual(0);
    expect(record).not.toHaveProperty('slack_failed_at');
  });

  it("uses authed_user.access_token when the user's OAuth response has no bot token, and sends the spec defaults", async () => {
    const { trackingId } = (
      await send({ type: 'dm', to: { id: 'grace', slackChannel: 'U0GRACE', slackToken: { ok: true, authed_user: { id: 'U0GRACE', access_token: AUTHED_USER_TOKEN } } }, slack: { text: 'ping' } })
    ).json();
    const [post] = await peer.waitForPosts(1);
    expect(post.token).toBe(AUTHED_USER_TOKEN);
    expect(peer.callsOf('conversations.open').map((c) => [c.token, c.args])).toEqual([[AUTHED_USER_TOKEN, { users: 'U0GRACE' }]]);
    const { metadata, ...args } = post.args;
    expect(args).toEqual({ channel: 'D0GRACEX', text: 'ping', reply_broadcast: 'false', parse: 'none', link_names: 'false', mrkdwn: 'true', unfurl_links: 'true', unfurl_media: 'true' });
    // Without the sender's own metadata, the message carries the delivery's (what a retry looks for).
    expect(JSON.parse(String(metadata))).toEqual({ event_type: 'clarion_delivery', event_payload: { tracking_id: trackingId, delivery_id: await slackDeliveryId(trackingId) } });
    const record = await settled(trackingId, 'slack_delivered_at');
    expect(JSON.parse(record.slack_delivered_internal).channel).toBe('D0GRACEX');
  });

  it("falls back to the environment's bot token (PUT /settings/slack), kept encrypted and shown masked", async () => {
    expect((await settings('GET')).json()).toEqual({ botToken: null, source: 'none' });
    const noToken = (await send({ type: 'fallback', to: { id: 'lin', slackChannel: '@lin' }, slack: { text: 'hi {{ user.id }}' } })).json();
    const failed = await settled(noToken.trackingId, 'slack_failed_at');
    expect(failed.slack_failed_code).toBe('NO_SLACK_TOKEN');
    expect(peer.calls).toHaveLength(0);

    expect((await settings('PUT', { botToken: 'not-a-slack-token' })).statusCode).toBe(400);
    const put = await settings('PUT', { botToken: ENV_BOT_TOKEN, verify: true });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({ botToken: 'xoxb-****-bot', source: 'environment', team: { id: 'T0ACME', name: 'Acme' } });
    expect(peer.callsOf('auth.test').map((c) => c.token)).toEqual([ENV_BOT_TOKEN]);
    const got = (await settings('GET')).json();
    expect(got.botToken).toBe('xoxb-****-bot');
    expect(JSON.stringify(got)).not.toContain(ENV_BOT_TOKEN);
    const stored = await t.deps.db.selectFrom('slack_settings' as never).selectAll().execute();
    expect(stored).toHaveLength(1);
    expect(JSON.stringify(stored)).not.toContain(ENV_BOT_TOKEN);

    const { trackingId } = (await send({ type: 'fallback', to: { id: 'lin' }, slack: { text: 'hi {{ user.id }}' } })).json();
    const [post] = await peer.waitForPosts(1);
    expect(post).toMatchObject({ token: ENV_BOT_TOKEN, channel: 'D0LINX' });
    expect(post.args.text).toBe('hi lin');
    expect(peer.callsOf('users.list').every((c) => c.token === ENV_BOT_TOKEN)).toBe(true);
    await settled(trackingId, 'slack_delivered_at');

    // A token Slack refuses is not saved.
    expect((await settings('PUT', { botToken: 'xoxb-0000-revoked-one', verify: true })).statusCode).toBe(400);
    expect((await settings('GET')).json().botToken).toBe('xoxb-****-bot');
    expect((await settings('DELETE')).statusCode).toBe(200);
    expect((await settings('DELETE')).statusCode).toBe(404);
    expect((await settings('GET')).json().source).toBe('none');
  });

  it('a permanent Slack error fails the delivery at once with its code', async () => {
    const { trackingId } = (await send({ type: 'alerts', to: { id: 'ada-lost', slackChannel: '#nope', slackToken: { ok: true, access_token: WORKSPACE_TOKEN } }, slack: { text: 'lost' } })).json();
    const record = await settled(trackingId, 'slack_failed_at');
    expect(record.slack_failed_code).toBe('channel_not_found');
    expect(record.slack_failed_internal).toContain('channel_not_found');
    expect(record.slack_failed_internal).not.toContain(WORKSPACE_TOKEN);
    expect(record).not.toHaveProperty('slack_delivered_at');
    expect(peer.callsOf('chat.postMessage')).toHaveLength(1);
  });

  it('ratelimited is retried by the engine after Retry-After, and every attempt is recorded', async () => {
    peer.fail('chat.postMessage', { ratelimited: 1 });
    const { trackingId } = (await send({ type: 'alerts', to: { id: 'ada-busy', slackChannel: 'C0GENERAL', slackToken: { ok: true, access_token: WORKSPACE_TOKEN } }, slack: { text: 'busy' } })).json();
    await peer.waitForPosts(1);
    const record = await settled(trackingId, 'slack_delivered_at');
    const [first, second] = peer.callsOf('chat.postMessage');
    expect(peer.callsOf('chat.postMessage')).toHaveLength(2);
    // Retry-After: 1 second (a small allowance for the clocks of the two sides).
    expect(second.at - first.at).toBeGreaterThanOrEqual(950);
    expect(record.slack_failed_at).toBeUndefined();
    const { rows: attempts } = await sql<{ outcome: string; provider_code: string | null }>`
      select a.outcome, a.provider_code from delivery_attempts a join deliveries d on d.id = a.delivery_id
      where d.tracking_id = ${trackingId} order by a.attempt`.execute(t.deps.db);
    expect(attempts).toEqual([
      { outcome: 'retry', provider_code: '429' },
      { outcome: 'success', provider_code: null },
    ]);
  });

  describe('a post whose outcome is unknown (HTTP 500 after Slack kept, or did not keep, the message)', () => {
    const to = (id: string) => ({ id, slackChannel: 'C0GENERAL', slackToken: { ok: true, access_token: WORKSPACE_TOKEN } });

    it('is not posted again when Slack posted it: the retry finds it in conversations.history by its metadata', async () => {
      peer.fail('chat.postMessage', { posted: true, answer: 500 });
      const { trackingId } = (await send({ type: 'alerts', to: to('ada-500'), slack: { text: 'once only' } })).json();
      const record = await settled(trackingId, 'slack_delivered_at');
      expect(peer.posted).toHaveLength(1);
      expect(peer.callsOf('chat.postMessage')).toHaveLength(1);
      const [lookup] = peer.callsOf('conversations.history');
      expect(lookup.args).toMatchObject({ channel: 'C0GENERAL', include_all_metadata: 'true', inclusive: 'true' });
      expect(JSON.parse(record.slack_delivered_internal)).toEqual({ channel: 'C0GENERAL', ts: peer.posted[0].ts });
      const attempts = await attemptsOf(trackingId);
      expect(attempts.map((a) => [a.outcome, a.provider_code])).toEqual([
        ['retry', '500'],
        ['success', null],
      ]);
      expect(attempts[1].detail).toContain('not posted again');
    });

    it('is posted on retry when Slack did not post it', async () => {
      peer.fail('chat.postMessage', { posted: false, answer: 500 });
      const { trackingId } = (await send({ type: 'alerts', to: to('ada-lost-500'), slack: { text: 'second try' } })).json();
      await settled(trackingId, 'slack_delivered_at');
      expect(peer.callsOf('conversations.history')).toHaveLength(1);
      expect(peer.callsOf('chat.postMessage')).toHaveLength(2);
      expect(peer.posted).toHaveLength(1);
    });

    it('is posted again when the conversation cannot be read (missing_scope): the message may then show twice', async () => {
      peer.fail('chat.postMessage', { posted: true, answer: 500 });
      peer.fail('conversations.history', { error: 'missing_scope' });
      const { trackingId } = (await send({ type: 'alerts', to: to('ada-no-scope'), slack: { text: 'twice' } })).json();
      await settled(trackingId, 'slack_delivered_at');
      expect(peer.callsOf('conversations.history')).toHaveLength(1);
      expect(peer.posted).toHaveLength(2);
      const attempts = await attemptsOf(trackingId);
      expect(attempts[1].detail).toContain('missing_scope');
    });

    it("a run after one that died mid-post (earlierAttempts() reports its unrecorded run) finds the dead run's message and posts nothing", async () => {
      const { trackingId } = (await send({ type: 'alerts', to: to('ada-died'), slack: { text: 'posted by a run that died' } })).json();
      await settled(trackingId, 'slack_delivered_at');
      expect(peer.posted).toHaveLength(1);
      // The delivery as the re-run of a routing job whose earlier run posted and died saw it: no attempt recorded.
      const repo = new MessagesRepository(t.deps.db);
      const delivery = { ...(await repo.findDelivery(await slackDeliveryId(trackingId)))!, status: 'pending' as const, attempts: 0 };
      const [message] = await repo.findMessagesForWork([trackingId]);
      const { executors, close } = buildExecutors(t.deps, t.services);
      try {
        const input = { delivery, message, content: JSON.parse(delivery.content ?? '{}') as Record<string, unknown>, body: JSON.parse(message.request) as SendBody };
        const outcome = await executors.SLACK!.deliver({ ...input, earlierAttempts: async () => [unrecordedRunAttempt(delivery, [])] });
        expect(outcome.result.response).toContain('not posted again');
        expect(peer.callsOf('conversations.history')).toHaveLength(1);
        expect(peer.posted).toHaveLength(1);
        // Told of nothing (a first attempt), it posts without looking.
        await executors.SLACK!.deliver({ ...input, earlierAttempts: async () => [] });
        expect(peer.callsOf('conversations.history')).toHaveLength(1);
        expect(peer.posted).toHaveLength(2);
      } finally {
        await close();
      }
    });

    it('a refusal (ratelimited) leaves nothing to look for', async () => {
      peer.fail('chat.postMessage', { ratelimited: 0 });
      const { trackingId } = (await send({ type: 'alerts', to: to('ada-refused'), slack: { text: 'refused first' } })).json();
      await settled(trackingId, 'slack_delivered_at');
      expect(peer.callsOf('conversations.history')).toHaveLength(0);
      expect(peer.posted).toHaveLength(1);
    });
  });
});

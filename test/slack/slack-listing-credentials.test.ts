// Who may list a Slack workspace with which token: the environment's bot token (PUT
// /settings/slack) is the company's and sees its channels, private ones included, and its
// members. End-user credentials (the in-app client's Basic clientId:userId[:userHash], the
// environment's public key acting for a user) list only with the user's own Slack token and are
// told to connect Slack first without one; server credentials (secret API key, Basic
// clientId:clientSecret, JWT) may still list with the bot token. The Slack peer records every call
// it receives, so "the bot token was never used" is checked where Slack would see it.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { signAccountToken } from '../../src/modules/auth/jwt.js';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SlackPeer, startSlackPeer } from '../helpers/slack-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const BOT_TOKEN = 'xoxb-company-bot-4242';
const USER_TOKEN = 'xoxb-users-own-install-7777';

describe.each(STORAGE_KINDS)('Slack workspace listing: end users use only their own token (%s)', (kind) => {
  let t: TestContext;
  let slack: SlackPeer;
  let publicKey: string;
  const basic = (user: string, secret: string) => `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;
  const endUser = (userId: string, hash?: string) => basic(t.account.clientId, hash ? `${userId}:${hash}` : userId);
  const get = (url: string, authorization: string) => t.app.inject({ method: 'GET', url, headers: { authorization } });
  const identify = async (userId: string, body: object, authorization = endUser(userId)) => {
    const res = await t.app.inject({ method: 'POST', url: `/${t.account.clientId}/users/${userId}`, headers: { authorization }, payload: body });
    expect(res.statusCode, res.body).toBe(200);
  };
  const notConnected = (userId: string) => ({
    code: 'NOT_FOUND',
    message: `User "${userId}" has not connected Slack: the workspace is listed with the user's own Slack token only.`,
    fix: expect.stringContaining('/slack-oauth') as unknown,
  });

  beforeAll(async () => {
    slack = await startSlackPeer({
      tokens: [BOT_TOKEN, USER_TOKEN],
      channels: [
        { id: 'C1', name: 'general' },
        { id: 'C2', name: 'board-only', isPrivate: true },
      ],
      users: [
        { id: 'U1', name: 'ceo' },
        { id: 'UBOT', name: 'clarion-bot' },
      ],
    });
    t = await createTestContext(kind, { config: { slackApiUrl: slack.url } });
    const put = await t.app.inject({ method: 'PUT', url: '/settings/slack', headers: t.auth, payload: { botToken: BOT_TOKEN } });
    expect(put.statusCode, put.body).toBe(200);
    const key = await t.app.inject({ method: 'POST', url: '/keys', headers: t.auth, payload: { name: 'web page', keyType: 'public' } });
    publicKey = key.json<{ key: string }>().key;
    await identify('mallory', { email: 'mallory@example.com' });
  });
  beforeEach(() => slack.reset());
  afterAll(async () => {
    await t?.close();
    await slack?.close();
  });

  it("an in-app user without a Slack token of their own is told to connect Slack; Slack is never asked with the bot token", async () => {
    const res = await get(`/${t.account.clientId}/users/mallory/slack/channels`, endUser('mallory'));
    expect(res.statusCode, res.body).toBe(404);
    expect(res.json().error).toEqual(notConnected('mallory'));
    expect(res.body).not.toContain('board-only');
    expect(slack.calls).toEqual([]);
  });

  it('the public key acting for a user without a token is refused the same way', async () => {
    const res = await get('/users/mallory/slack-channels', `Bearer ${publicKey}`);
    expect(res.statusCode, res.body).toBe(404);
    expect(res.json().error).toEqual(notConnected('mallory'));
    expect(slack.calls).toEqual([]);
  });

  it('a signed-in user of a secure environment (with the user hash) is refused the same way', async () => {
    const secure = await t.app.inject({ method: 'PATCH', url: `/environments/${t.account.clientId}`, headers: t.auth, payload: { secureMode: true } });
    expect(secure.statusCode, secure.body).toBe(200);
    try {
      const hash = userHash(t.account.clientSecret, 'mallory');
      const viaClient = await get(`/${t.account.clientId}/users/mallory/slack/channels`, endUser('mallory', hash));
      expect([viaClient.statusCode, viaClient.json().error]).toEqual([404, notConnected('mallory')]);
      const viaPublicKey = await get(`/users/mallory/slack-channels?userIdHash=${encodeURIComponent(hash)}`, `Bearer ${publicKey}`);
      expect([viaPublicKey.statusCode, viaPublicKey.json().error]).toEqual([404, notConnected('mallory')]);
      expect(slack.calls).toEqual([]);
    } finally {
      await t.app.inject({ method: 'PATCH', url: `/environments/${t.account.clientId}`, headers: t.auth, payload: { secureMode: false } });
    }
  });

  it("an end user with their own Slack token lists with that token only", async () => {
    await identify('ada', { slackToken: { ok: true, access_token: USER_TOKEN, authed_user: { id: 'U1' } } });
    for (const [url, authorization] of [
      [`/${t.account.clientId}/users/ada/slack/channels`, endUser('ada')],
      ['/users/ada/slack-channels', `Bearer ${publicKey}`],
    ]) {
      slack.reset();
      const res = await get(url, authorization);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
      expect(res.json().channels.map((c: { name: string }) => c.name)).toEqual(['general', 'board-only']);
      expect(slack.calls.length).toBeGreaterThan(0);
      expect(new Set(slack.calls.map((c) => c.token))).toEqual(new Set([USER_TOKEN]));
    }
  });

  it("server credentials (secret key, Basic clientId:clientSecret, JWT) still list with the environment's bot token", async () => {
    const jwt = await signAccountToken(t.deps.secrets, { accountId: t.account.accountId, subject: 'ops' }, 3600, t.deps.clock.now());
    for (const [query, authorization] of [
      ['', t.auth.authorization],
      ['', basic(t.account.clientId, t.account.clientSecret)],
      [`?envId=${t.account.clientId}`, `Bearer ${jwt}`],
    ]) {
      slack.reset();
      const res = await get(`/users/mallory/slack-channels${query}`, authorization);
      expect(res.statusCode, `${authorization.slice(0, 12)}: ${res.body}`).toBe(200);
      expect(res.json()).toMatchObject({ me: { id: 'UBOT' }, hasMoreChannels: false });
      expect(new Set(slack.calls.map((c) => c.token))).toEqual(new Set([BOT_TOKEN]));
    }
  });
});

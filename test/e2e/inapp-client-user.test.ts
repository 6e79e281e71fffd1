// The published in-app client @notificationapi/core, the user's own record and Slack workspace,
// against the listening server on both engines: identify, user.get, getUserAccountMetadata,
// slack.getChannels (listed from a local Slack Web API peer) and slack.setChannel (a Slack send
// then posts in the channel picked). slack.getOAuthUrl is not exercised: it builds a slack.com
// URL for the hosted service's own Slack app (client_id and redirect host fixed in the package).
import { NotificationAPIClientSDK } from '@notificationapi/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { type ClientCall, routeClientFetch } from '../helpers/client-fetch.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SlackPeer, startSlackPeer } from '../helpers/slack-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const calls: ClientCall[] = [];

/** The package's typings do not resolve under NodeNext, so name what the test reads. */
interface ClientUser {
  id: string;
  email?: string;
  number?: string;
  slackChannel?: string;
  slackToken?: { access_token?: string; authed_user?: { id?: string; access_token?: string } };
  lastSeenTime?: string;
  error?: { code: string };
}
interface Listing {
  channels: { id: string; name: string; is_private: boolean }[];
  users: { id: string; name: string }[];
  me?: { id: string; name: string };
  hasMoreChannels: boolean;
  hasMoreUsers: boolean;
  error?: { code: string; message: string };
}

const BOT_TOKEN = 'xoxb-user-install-1234';
const ENV_TOKEN = 'xoxb-environment-5678';

describe.each(STORAGE_KINDS)('in-app client @notificationapi/core: identify, user.get, slack (%s)', (kind) => {
  let t: TestContext;
  let slack: SlackPeer;
  let host = '';
  let restoreFetch: () => void;

  beforeAll(async () => {
    slack = await startSlackPeer({
      tokens: [BOT_TOKEN, ENV_TOKEN],
      // Pages of 2: five channels and four members take several calls each.
      channels: [
        { id: 'C01', name: 'general' },
        { id: 'C02', name: 'alerts' },
        { id: 'C03', name: 'ops', isPrivate: true },
        { id: 'C04', name: 'old', archived: true },
        { id: 'C05', name: 'random' },
      ],
      users: [
        { id: 'U01', name: 'ada' },
        { id: 'U02', name: 'bob' },
        { id: 'U03', name: 'cy' },
        { id: 'UBOT', name: 'clarion-bot' },
      ],
    });
    t = await createTestContext(kind, { workers: true, config: { slackApiUrl: slack.url } });
    ({ host, restore: restoreFetch } = await routeClientFetch(t.app, calls));
  });
  afterAll(async () => {
    restoreFetch();
    await t?.close();
    await slack?.close();
  });

  it('identify creates and merges the user; user.get reads it back with the Slack token masked', async () => {
    const client = NotificationAPIClientSDK.init({ clientId: t.account.clientId, userId: 'ada@example.com', host });
    calls.length = 0;
    await client.identify({ email: 'ada@example.com', number: '+15005550006' });
    // Exactly what the client sent: POST /{clientId}/users/{userId}/ (trailing slash), JSON as a string body.
    expect(calls[0]).toMatchObject({ method: 'POST', url: `https://${host}/${t.account.clientId}/users/${encodeURIComponent('ada@example.com')}/` });
    expect(JSON.parse(calls[0].body!)).toEqual({ email: 'ada@example.com', number: '+15005550006' });

    await client.identify({ id: 'ada@example.com', slackToken: { ok: true, access_token: BOT_TOKEN, authed_user: { id: 'U01', access_token: 'xoxp-installer-9999' } } });
    const user = (await client.user.get()) as unknown as ClientUser;
    expect(user).toMatchObject({ id: 'ada@example.com', email: 'ada@example.com', number: '+15005550006' });
    expect(user.slackToken?.access_token).toBe('xoxb-…1234');
    expect(user.slackToken?.authed_user).toEqual({ id: 'U01', access_token: 'xoxp-…9999' });
    expect(user.lastSeenTime).toBeDefined();
    // The same record through the API.
    const viaApi = (await t.app.inject({ method: 'GET', url: `/users/${encodeURIComponent('ada@example.com')}`, headers: t.auth })).json<ClientUser>();
    expect(viaApi).toMatchObject({ email: 'ada@example.com', number: '+15005550006' });

    // The client refuses another id itself; the server refuses it too.
    await expect(client.identify({ id: 'someone-else' })).rejects.toThrow(/does not match/);
    const refused = (await client.rest.generic('POST', '', { id: 'someone-else' })) as ClientUser;
    expect(refused.error?.code).toBe('VALIDATION_FAILED');
  });

  it('user.get of a user never identified is the NOT_FOUND Error body', async () => {
    const client = NotificationAPIClientSDK.init({ clientId: t.account.clientId, userId: 'nobody', host });
    expect(((await client.user.get()) as unknown as ClientUser).error?.code).toBe('NOT_FOUND');
  });

  it('getUserAccountMetadata answers the environment VAPID key', async () => {
    const client = NotificationAPIClientSDK.init({ clientId: t.account.clientId, userId: 'ada@example.com', host });
    const { userAccountMetadata } = await client.getUserAccountMetadata();
    const { publicKey } = (await t.app.inject({ method: 'GET', url: '/settings/push/web', headers: t.auth })).json<{ publicKey: string }>();
    expect(userAccountMetadata).toEqual({ logo: '', environmentVapidPublicKey: publicKey, hasWebPushEnabled: true });
  });

  it("slack.getChannels lists the user's workspace with the user's token; setChannel routes Slack sends there", async () => {
    const client = NotificationAPIClientSDK.init({ clientId: t.account.clientId, userId: 'ada@example.com', host });
    slack.reset();
    const listing = (await client.slack.getChannels()) as unknown as Listing;
    expect(listing.channels.map((c) => c.name)).toEqual(['general', 'alerts', 'ops', 'random']);
    expect(listing.channels.find((c) => c.id === 'C03')?.is_private).toBe(true);
    expect(listing.users.map((u) => u.id)).toEqual(['U01', 'U02', 'U03', 'UBOT']);
    // The installing user of the slackToken.
    expect(listing.me).toMatchObject({ id: 'U01', name: 'ada' });
    expect(listing).toMatchObject({ hasMoreChannels: false, hasMoreUsers: false });
    // Every page asked with the user's bot token; the channel listing left archived ones out.
    expect(slack.callsOf('conversations.list').length).toBe(2);
    expect(slack.callsOf('users.list').length).toBe(2);
    expect(new Set(slack.calls.map((c) => c.token))).toEqual(new Set([BOT_TOKEN]));
    expect(slack.callsOf('conversations.list')[0].args).toMatchObject({ types: 'public_channel,private_channel', exclude_archived: 'true' });

    await client.slack.setChannel('C02');
    expect(((await client.user.get()) as unknown as ClientUser).slackChannel).toBe('C02');
    const sent = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'deploys', to: { id: 'ada@example.com' }, slack: { text: 'Deployed' } } });
    expect(sent.statusCode).toBeGreaterThanOrEqual(200);
    expect(sent.statusCode).toBeLessThan(300);
    const { trackingId } = sent.json<{ trackingId: string }>();
    const [post] = await slack.waitForPosts(1);
    expect(post).toMatchObject({ channel: 'C02', token: BOT_TOKEN, args: expect.objectContaining({ text: 'Deployed' }) as unknown });
    await eventually(async () => {
      const log = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json<{ logs: Record<string, unknown>[] }>().logs[0];
      return log?.slack_delivered_at ? log : undefined;
    });
  });

  it("never lists with the environment's bot token for the user: without a token of their own they are told to connect Slack; Slack refusing is said in the Error body", async () => {
    const client = NotificationAPIClientSDK.init({ clientId: t.account.clientId, userId: 'bob', host });
    await client.identify({ email: 'bob@example.com' });
    const none = (await client.slack.getChannels()) as unknown as Listing;
    expect(none.error).toMatchObject({ code: 'NOT_FOUND', message: expect.stringContaining('has not connected Slack') as unknown });

    expect((await t.app.inject({ method: 'PUT', url: '/settings/slack', headers: t.auth, payload: { botToken: ENV_TOKEN } })).statusCode).toBe(200);
    slack.reset();
    const still = (await client.slack.getChannels()) as unknown as Listing;
    expect(still.error).toEqual(none.error);
    expect(slack.calls).toEqual([]);

    await client.identify({ id: 'bob', slackToken: { ok: true, access_token: BOT_TOKEN } });
    slack.fail('conversations.list', { error: 'missing_scope' });
    const refused = (await client.slack.getChannels()) as unknown as Listing;
    expect(refused.error).toMatchObject({ code: 'PROVIDER_ERROR', message: expect.stringContaining('missing_scope') as unknown });
  });

  it('secure mode: identify, user.get and getChannels need the user hash', async () => {
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Secure' } })).json<{ clientId: string; clientSecret: string }>();
    await t.app.inject({ method: 'PATCH', url: `/environments/${env.clientId}`, headers: t.auth, payload: { secureMode: true } });
    const hashed = NotificationAPIClientSDK.init({ clientId: env.clientId, userId: 'cy', hashedUserId: userHash(env.clientSecret, 'cy'), host });
    await hashed.identify({ email: 'cy@example.com' });
    expect(((await hashed.user.get()) as unknown as ClientUser).email).toBe('cy@example.com');

    const unhashed = NotificationAPIClientSDK.init({ clientId: env.clientId, userId: 'cy', host });
    expect(((await unhashed.rest.generic('POST', '', { email: 'mallory@example.com' })) as ClientUser).error?.code).toBe('UNAUTHORIZED');
    expect(((await unhashed.user.get()) as unknown as ClientUser).error?.code).toBe('UNAUTHORIZED');
    expect(((await unhashed.slack.getChannels()) as unknown as Listing).error?.code).toBe('UNAUTHORIZED');
    // The refused identify changed nothing (the client is one object: init again to act as cy).
    const again = NotificationAPIClientSDK.init({ clientId: env.clientId, userId: 'cy', hashedUserId: userHash(env.clientSecret, 'cy'), host });
    expect(((await again.user.get()) as unknown as ClientUser).email).toBe('cy@example.com');
  });
});

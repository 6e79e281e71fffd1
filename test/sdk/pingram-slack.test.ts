import { CreateKeyRequestKeyTypeEnum, Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { sdkRefusal } from '../helpers/error-body.js';
import { type SlackPeer, startSlackPeer } from '../helpers/slack-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const APP = { clientId: '1234567890.0987654321', clientSecret: 'f00dfeedc0ffee4b1d5ecret' };
/** The app's own page where Slack sends users back in the SDK's flow; never fetched (only named). */
const APP_PAGE = 'https://app.example/slack/done';

/**
 * Slack installs with OAuth v2 and the workspace listing through the pingram SDK's UserApi
 * (generateSlackOauthPath, getAvailableSlackChannels) and Clarion's own authorize URL and
 * callback, against a loopback Slack peer that plays the authorize page and oauth.v2.access.
 */
describe.each(STORAGE_KINDS)('pingram SDK: Slack OAuth and channels (%s)', (kind) => {
  let t: TestContext;
  let clock: ManualClock;
  let slack: SlackPeer;
  let address: string;
  let admin: Pingram;
  const api = (method: string, path: string, body?: unknown, authorization = t.auth.authorization) =>
    fetch(`${address}${path}`, { method, headers: { authorization, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
  /** The user approves on Slack's page: the peer's 302 back to the redirect URI. */
  const approve = async (authorizeUrl: string) => {
    const res = await fetch(authorizeUrl, { redirect: 'manual' });
    expect(res.status).toBe(302);
    return new URL(res.headers.get('location')!);
  };
  /** A code for the app's own page, as Slack's redirect would hand it to that page. */
  const codeForAppPage = async () => {
    const authorize = new URL('/oauth/v2/authorize', slack.url);
    authorize.search = new URLSearchParams({ client_id: APP.clientId, scope: 'chat:write', redirect_uri: APP_PAGE, state: 'app-state' }).toString();
    return (await approve(authorize.href)).searchParams.get('code')!;
  };
  const storedToken = async (userId: string) =>
    (await t.deps.db.selectFrom('users').select('slack_token').where('env_id', '=', t.account.clientId).where('id', '=', userId).executeTakeFirst())?.slack_token;

  beforeAll(async () => {
    clock = new ManualClock(new Date());
    slack = await startSlackPeer({
      tokens: [],
      apps: [APP],
      installer: 'U1ADA',
      channels: [{ id: 'C1', name: 'general' }, { id: 'C2', name: 'alerts', isPrivate: true }],
      users: [{ id: 'U1ADA', name: 'ada' }],
    });
    t = await createTestContext(kind, { clock, config: { slackApiUrl: slack.url } });
    address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    t.deps.config.publicUrl = address;
    admin = new Pingram({ apiKey: t.account.apiKey, baseUrl: address });
  });
  afterAll(async () => {
    await t?.close();
    await slack?.close();
  });

  it("stores the environment's Slack app with its secret encrypted, and reads it back masked", async () => {
    expect((await api('GET', '/users/ada/slack-oauth')).status).toBe(404);
    const put = await api('PUT', '/settings/slack/app', APP);
    expect(put.status).toBe(200);
    const expected = { clientId: APP.clientId, clientSecret: '****cret', redirectUri: `${address}/slack/oauth/callback`, scopes: ['chat:write', 'chat:write.customize', 'chat:write.public', 'im:write', 'channels:read', 'groups:read', 'users:read'] };
    expect(await put.json()).toMatchObject(expected);
    expect(await (await api('GET', '/settings/slack/app')).json()).toMatchObject(expected);
    const row = await t.deps.db.selectFrom('slack_apps' as never).selectAll().executeTakeFirst();
    expect(JSON.stringify(row)).not.toContain(APP.clientSecret);
  });

  it("installs through Clarion's authorize URL and callback: the token is stored sealed and lists the workspace", async () => {
    const start = (await (await api('GET', '/users/ada/slack-oauth')).json()) as { url: string; redirectUri: string; expiresAt: string };
    const authorize = new URL(start.url);
    expect(authorize.origin + authorize.pathname).toBe(new URL('/oauth/v2/authorize', slack.url).href);
    expect(authorize.searchParams.get('client_id')).toBe(APP.clientId);
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${address}/slack/oauth/callback`);
    expect(authorize.searchParams.get('scope')).toBe('chat:write,chat:write.customize,chat:write.public,im:write,channels:read,groups:read,users:read');
    expect(start.expiresAt).toBe(new Date(clock.now().getTime() + 600_000).toISOString());

    const back = await approve(start.url);
    expect(back.origin + back.pathname).toBe(start.redirectUri);
    const done = await fetch(back);
    expect([done.status, await done.text()]).toEqual([200, 'Slack is connected for ada. You can close this window.']);

    const exchange = slack.callsOf('oauth.v2.access');
    expect(exchange.map((c) => c.args)).toEqual([{ client_id: APP.clientId, code: back.searchParams.get('code'), redirect_uri: start.redirectUri }]);
    const [install] = slack.installs as { access_token: string }[];
    const user = await admin.user.getUser('ada');
    expect(user.slackToken).toMatchObject({ ok: true, team: { id: 'T0PEER' }, authed_user: { id: 'U1ADA' }, access_token: `xoxb-…${install.access_token.slice(-4)}` });
    const stored = (await storedToken('ada'))!;
    expect(stored.startsWith('enc:')).toBe(true);
    expect(stored).not.toContain(install.access_token);

    await admin.user.getAvailableSlackChannels('ada');
    expect(slack.callsOf('conversations.list').at(-1)?.token).toBe(install.access_token);
    const listing = (await (await api('GET', '/users/ada/slack-channels')).json()) as { channels: { name: string }[]; me: { id: string } };
    expect([listing.channels.map((c) => c.name), listing.me.id]).toEqual([['general', 'alerts'], 'U1ADA']);

    // A code is single-use: the same redirect again is Slack's invalid_code.
    const replay = await fetch(back);
    expect(replay.status).toBe(400);
    expect(((await replay.json()) as { error: { message: string } }).error.message).toBe('Slack refused the code: invalid_code.');
  });

  it('refuses a callback with a forged or expired state, and one the user cancelled', async () => {
    const forged = await fetch(`${address}/slack/oauth/callback?code=x&state=not-a-state`);
    expect([forged.status, ((await forged.json()) as { error: { code: string } }).error.code]).toEqual([401, 'UNAUTHORIZED']);

    const late = (await (await api('GET', '/users/ada/slack-oauth')).json()) as { url: string };
    const back = await approve(late.url);
    clock.advance(11 * 60_000);
    expect((await fetch(back)).status).toBe(401);

    slack.denyNextInstall();
    const cancelled = await fetch(await approve(((await (await api('GET', '/users/ada/slack-oauth')).json()) as { url: string }).url));
    expect(cancelled.status).toBe(400);
    expect(((await cancelled.json()) as { error: { message: string } }).error.message).toBe('The Slack install was not completed: access_denied.');
    expect(slack.installs).toHaveLength(1);
  });

  it("user.generateSlackOauthPath exchanges the code the app's own page received", async () => {
    await admin.user.generateSlackOauthPath('bob', { code: await codeForAppPage(), redirect_uri: APP_PAGE });
    const install = slack.installs.at(-1) as { access_token: string };
    expect(slack.callsOf('oauth.v2.access').at(-1)?.args).toMatchObject({ redirect_uri: APP_PAGE });
    await admin.user.getAvailableSlackChannels('bob');
    expect(slack.callsOf('conversations.list').at(-1)?.token).toBe(install.access_token);

    const wrongPage = await sdkRefusal(admin.user.generateSlackOauthPath('bob', { code: await codeForAppPage(), redirect_uri: 'https://app.example/other' }));
    expect([wrongPage.status, wrongPage.body.error.message]).toEqual([400, 'Slack refused the code: bad_redirect_uri.']);
  });

  it('acts for the user with a public key, which needs the user hash in secure mode and cannot read the app', async () => {
    const { key } = await admin.keys.createAPIKey({ keyType: CreateKeyRequestKeyTypeEnum.PUBLIC, name: 'settings page' });
    const browser = new Pingram({ apiKey: key, baseUrl: address });
    await browser.user.generateSlackOauthPath('carol', { code: await codeForAppPage(), redirect_uri: APP_PAGE });
    expect(await storedToken('carol')).toMatch(/^enc:/);
    const app = await api('GET', '/settings/slack/app', undefined, `Bearer ${key}`);
    expect([app.status, ((await app.json()) as { error: { code: string } }).error.code]).toEqual([403, 'FORBIDDEN']);

    await admin.environments.updateEnvironment(t.account.clientId, { secureMode: true });
    try {
      expect((await sdkRefusal(browser.user.getAvailableSlackChannels('carol'))).status).toBe(401);
      const hashed = await api('GET', `/users/carol/slack-channels?userIdHash=${encodeURIComponent(userHash(t.account.clientSecret, 'carol'))}`, undefined, `Bearer ${key}`);
      expect(hashed.status).toBe(200);
      // The server's own key needs no hash.
      await admin.user.getAvailableSlackChannels('carol');
    } finally {
      await admin.environments.updateEnvironment(t.account.clientId, { secureMode: false });
    }
  });

  it('answers 502 when Slack refuses the app credentials, and 404 once the app is removed', async () => {
    await api('PUT', '/settings/slack/app', { clientId: APP.clientId, clientSecret: 'not-the-secret' });
    const refused = await sdkRefusal(admin.user.generateSlackOauthPath('dan', { code: await codeForAppPage(), redirect_uri: APP_PAGE }));
    expect([refused.status, refused.body.error.code]).toEqual([502, 'PROVIDER_ERROR']);
    expect(refused.body.error.message).toMatch(/bad_client_secret/);

    expect((await api('DELETE', '/settings/slack/app')).status).toBe(200);
    const none = await api('GET', '/users/dan/slack-oauth');
    expect([none.status, ((await none.json()) as { error: { message: string } }).error.message]).toEqual([404, 'This environment has no Slack app to install.']);
  });
});

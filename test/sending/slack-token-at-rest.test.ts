import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SlackPeer, startSlackPeer } from '../helpers/slack-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const BOT = 'xoxb-4242-1337-SECRETbotTOKENabcd';
const USER = 'xoxp-4242-1337-SECRETuserTOKENwxyz';
const REFRESH = 'xoxe-1-SECRETrefreshTOKEN9876';

describe.each(STORAGE_KINDS)("a user's slackToken at rest and on reads (%s)", (kind) => {
  let t: TestContext;
  let peer: SlackPeer;
  const oauth = (bot = BOT) => ({
    ok: true,
    access_token: bot,
    token_type: 'bot',
    refresh_token: REFRESH,
    team: { id: 'T0ACME', name: 'Acme' },
    authed_user: { id: 'U0ADA', access_token: USER, token_type: 'user' },
  });
  const call = (method: 'GET' | 'POST', url: string, payload?: object) => t.app.inject({ method, url, headers: t.auth, ...(payload ? { payload } : {}) });
  const stored = async (id: string) =>
    (await sql<{ slack_token: string | null }>`select slack_token from users where id = ${id}`.execute(t.deps.db)).rows[0]?.slack_token ?? null;
  const expectNoSecret = (text: string) => {
    for (const secret of [BOT, USER, REFRESH]) expect(text).not.toContain(secret);
  };
  const delivered = (trackingId: string) =>
    eventually(
      async () => {
        const log = (await call('GET', `/logs/${trackingId}`)).json().logs[0];
        return log?.slack_delivered_at || log?.slack_failed_at ? log : undefined;
      },
      15_000,
      'slack delivery',
    );

  beforeAll(async () => {
    peer = await startSlackPeer({ tokens: [BOT, 'xoxb-other-workspace-token-0000'], channels: [{ id: 'C0GENERAL', name: 'general' }], team: { id: 'T0ACME', name: 'Acme' } });
    t = await createTestContext(kind, { workers: true, config: { slackApiUrl: peer.url } });
  });
  afterAll(async () => {
    await t?.close();
    await peer?.close();
  });
  beforeEach(() => peer.reset());

  it('is stored sealed and read masked: identify echo, GET one, GET list', async () => {
    const echo = await call('POST', '/users/ada', { slackChannel: '#general', slackToken: oauth() });
    expect(echo.statusCode).toBe(200);
    const masked = {
      ok: true,
      access_token: 'xoxb-…abcd',
      token_type: 'bot',
      refresh_token: 'xoxe-…9876',
      team: { id: 'T0ACME', name: 'Acme' },
      authed_user: { id: 'U0ADA', access_token: 'xoxp-…wxyz', token_type: 'user' },
    };
    expect(echo.json().slackToken).toEqual(masked);
    const one = await call('GET', '/users/ada');
    expect(one.json().slackToken).toEqual(masked);
    const list = await call('GET', '/users');
    expect(list.json().users.find((u: { id: string }) => u.id === 'ada').slackToken).toEqual(masked);
    for (const res of [echo, one, list]) expectNoSecret(res.body);

    const column = await stored('ada');
    expect(column).toMatch(/^enc:v1\./);
    expectNoSecret(column!);
  });

  it('a send carrying the token stores it sealed, and Slack receives the real token', async () => {
    const res = await call('POST', '/send', { type: 'alerts', to: { id: 'grace', slackChannel: '#general', slackToken: oauth() }, slack: { text: 'hi' } });
    expect(res.statusCode).toBe(200);
    const [post] = await peer.waitForPosts(1);
    expect(post.token).toBe(BOT);
    expect((await delivered(res.json().trackingId)).slack_delivered_at).toBeTruthy();
    const column = await stored('grace');
    expect(column).toMatch(/^enc:v1\./);
    expectNoSecret(column!);
  });

  it('the same token sent again writes nothing; a new token replaces it', async () => {
    await call('POST', '/send', { type: 'alerts', to: { id: 'lin', slackChannel: '#general', slackToken: oauth() }, slack: { text: 'one' } });
    await peer.waitForPosts(1);
    const first = await stored('lin');
    await call('POST', '/send', { type: 'alerts', to: { id: 'lin', slackChannel: '#general', slackToken: oauth() }, slack: { text: 'two' } });
    await peer.waitForPosts(2);
    expect(await stored('lin')).toBe(first);
    await call('POST', '/users/lin', { slackToken: oauth('xoxb-other-workspace-token-0000') });
    expect(await stored('lin')).not.toBe(first);
    peer.reset();
    await call('POST', '/send', { type: 'alerts', to: { id: 'lin' }, slack: { text: 'three' } });
    expect((await peer.waitForPosts(1))[0].token).toBe('xoxb-other-workspace-token-0000');
  });

  it('a masked token sent back is refused, so it never replaces the real one', async () => {
    await call('POST', '/users/mo', { slackChannel: '#general', slackToken: oauth() });
    const read = (await call('GET', '/users/mo')).json();
    const res = await call('POST', '/users/mo', read);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(res.json().error.message).toContain('slackToken');
    const send = await call('POST', '/send', { type: 'alerts', to: { id: 'mo' }, slack: { text: 'still real' } });
    expect(send.statusCode).toBe(200);
    expect((await peer.waitForPosts(1))[0].token).toBe(BOT);
  });

  it('a token stored in clear by an older version is read masked, used as is, and sealed on the next write', async () => {
    await call('POST', '/users/old', { slackChannel: '#general' });
    await sql`update users set slack_token = ${JSON.stringify(oauth())} where id = 'old'`.execute(t.deps.db);
    const read = await call('GET', '/users/old');
    expect(read.json().slackToken.access_token).toBe('xoxb-…abcd');
    expectNoSecret(read.body);
    const send = await call('POST', '/send', { type: 'alerts', to: { id: 'old' }, slack: { text: 'legacy' } });
    expect((await peer.waitForPosts(1))[0].token).toBe(BOT);
    await delivered(send.json().trackingId);
    await call('POST', '/users/old', { timezone: 'Europe/Paris' });
    const column = await stored('old');
    expect(column).toMatch(/^enc:v1\./);
    expectNoSecret(column!);
    expect((await call('GET', '/users/old')).json().slackToken.authed_user.access_token).toBe('xoxp-…wxyz');
  });
});

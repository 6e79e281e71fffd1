import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SlackClients } from '../../src/channels/slack/client.js';
import { listWorkspace } from '../../src/channels/slack/directory.js';
import { type SlackPeer, startSlackPeer } from '../helpers/slack-peer.js';

const TOKEN = 'xoxb-1111-2222-peertoken';

describe('Slack workspace listing (conversations.list, users.list against a local Slack peer)', () => {
  let peer: SlackPeer;
  const client = () => new SlackClients({ apiUrl: peer.url, logger: pino({ level: 'silent' }) }).for(TOKEN);

  beforeAll(async () => {
    peer = await startSlackPeer({
      tokens: [TOKEN],
      channels: ['c1', 'c2', 'c3', 'c4', 'c5'].map((name, i) => ({ id: `C${i}`, name })),
      users: [
        { id: 'U0', name: 'ada' },
        { id: 'U1', name: 'bob' },
        { id: 'U2', name: 'cy' },
        { id: 'UBOT', name: 'bot' },
      ],
      maxPageSize: 2,
    });
  });
  afterAll(() => peer.close());

  it('stops at its bound and says more remain', async () => {
    peer.reset();
    const listing = await listWorkspace(client(), 'U1', { maxItems: 3, pageSize: 2 });
    expect(listing.channels.map((c) => c.id)).toEqual(['C0', 'C1', 'C2']);
    expect(listing.users.map((u) => u.id)).toEqual(['U0', 'U1', 'U2']);
    expect(listing).toMatchObject({ hasMoreChannels: true, hasMoreUsers: true, me: { id: 'U1', name: 'bob' } });
    // Two pages each: the second asks only for what the bound leaves.
    expect(peer.callsOf('conversations.list').map((c) => c.args.limit)).toEqual(['2', '1']);
  });

  it('reads every page within the bound; `me` missing from the pages read is asked for with users.info', async () => {
    peer.reset();
    const listing = await listWorkspace(client(), undefined, { maxItems: 4, pageSize: 2 });
    expect(listing.channels).toHaveLength(4);
    expect(listing.hasMoreChannels).toBe(true);
    expect(listing).toMatchObject({ hasMoreUsers: false, me: { id: 'UBOT' } });
    expect(peer.callsOf('auth.test')).toHaveLength(1);
    expect(peer.callsOf('users.info')).toHaveLength(0);

    peer.reset();
    const bounded = await listWorkspace(client(), 'UBOT', { maxItems: 2, pageSize: 2 });
    expect(bounded.me).toMatchObject({ id: 'UBOT', name: 'bot' });
    expect(peer.callsOf('users.info').map((c) => c.args.user)).toEqual(['UBOT']);
  });

  it("Slack's refusal is the WebClient's error", async () => {
    peer.fail('users.list', { error: 'missing_scope' });
    await expect(listWorkspace(client(), 'U0')).rejects.toMatchObject({ data: { error: 'missing_scope' } });
  });
});

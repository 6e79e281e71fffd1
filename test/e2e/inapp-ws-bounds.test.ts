import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import type { InappNotification } from '../../src/modules/inapp/inapp.service.js';
import { CLOSE_TOO_MANY_SOCKETS, CLOSE_TOO_MUCH_UNSENT } from '../../src/realtime/hub.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { Client, inappSocketServer } from './inapp-ws-client.js';

describe.each(STORAGE_KINDS)('in-app websocket bounds (%s)', (kind) => {
  const server = inappSocketServer(kind);
  const { connect, connected } = server;
  const realtime = () => server.t.deps.inappRealtime;
  const notification = (extra: Partial<InappNotification> = {}): InappNotification => ({
    id: randomUUID(),
    notificationId: 'comment',
    seen: false,
    title: 'New comment',
    date: '2026-01-15T10:00:00.000Z',
    ...extra,
  });

  it('keeps at most 10 sockets per user: the 11th closes the oldest with 4008, the others still get pushes', async () => {
    const envId = server.t.account.clientId;
    const user = `tabs-${randomUUID()}`;
    const tabs: Client[] = [];
    for (let i = 0; i < 10; i++) tabs.push(await connect(envId, user));
    await connected(envId, user, 10);
    const eleventh = await connect(envId, user);
    expect(await tabs[0].closed).toEqual({ code: CLOSE_TOO_MANY_SOCKETS, reason: expect.stringContaining('too many sockets') });
    expect(realtime().connections(envId, user)).toBe(10);

    await realtime().publish({ accountId: server.t.account.accountId, envId, userId: user }, [notification()]);
    const kept = [...tabs.slice(1), eleventh];
    await vi.waitFor(() => expect(kept.map((c) => c.messages)).toEqual(kept.map(() => 1)));
    expect(tabs[0].messages).toBe(0);
    expect(kept.every((c) => c.ws.readyState === WebSocket.OPEN)).toBe(true);
  });

  it('drops a socket whose peer stops reading once its unsent data passes 1 MiB, with 4009, and keeps the reading one', async () => {
    const envId = server.t.account.clientId;
    const user = `slow-${randomUUID()}`;
    const slow = await connect(envId, user);
    const healthy = await connect(envId, user);
    await connected(envId, user, 2);
    // The client stops reading from TCP: frames pile up in the kernel buffers, then in the server's.
    const tcp = (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    tcp.pause();

    const scope = { accountId: server.t.account.accountId, envId, userId: user };
    const blob = 'x'.repeat(128 * 1024);
    let pushes = 0;
    // Up to 32 MiB: past what loopback TCP buffers hold (tcp_wmem max 4 MiB here) plus the bound.
    while (realtime().connections(envId, user) === 2 && pushes < 256) {
      await realtime().publish(scope, [notification({ parameters: { blob } })]);
      pushes++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(realtime().connections(envId, user)).toBe(1);
    expect(pushes).toBeLessThan(256);
    // The reading socket got every push.
    await vi.waitFor(() => expect(healthy.messages).toBe(pushes));
    await realtime().publish(scope, [notification()]);
    await vi.waitFor(() => expect(healthy.messages).toBe(pushes + 1));

    tcp.resume();
    expect(await slow.closed).toEqual({ code: CLOSE_TOO_MUCH_UNSENT, reason: 'too much unsent data' });
    // It reads what was queued before the drop (the last of it pushed it past the bound), then the close: nothing after.
    expect(slow.messages).toBe(pushes);
  });
});

describe('socket hub bounds', () => {
  it('does not count sockets that are already closing towards the cap', async () => {
    const { WebSocketServer } = await import('ws');
    const { SocketHub } = await import('../../src/realtime/hub.js');
    const hub = new SocketHub({ maxSocketsPerKey: 2 });
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    const serverSide: WebSocket[] = [];
    server.on('connection', (socket) => {
      serverSide.push(socket);
      hub.add('k', socket);
    });
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as { port: number };
    const open = () => Client.open(`ws://127.0.0.1:${port}/`);
    try {
      const first = await open();
      const second = await open();
      await vi.waitFor(() => expect(hub.count('k')).toBe(2));
      // The server side starts closing the second (as on a client's close frame) before a third arrives.
      serverSide[1].close(1000, 'bye');
      const third = await open();
      await vi.waitFor(() => expect(serverSide).toHaveLength(3));
      expect((await second.closed).code).toBe(1000);
      expect(first.ws.readyState).toBe(WebSocket.OPEN);
      expect(third.ws.readyState).toBe(WebSocket.OPEN);
      await vi.waitFor(() => expect(hub.count('k')).toBe(2));
      first.ws.close();
      third.ws.close();
    } finally {
      hub.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

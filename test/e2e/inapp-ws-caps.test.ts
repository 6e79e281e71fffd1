import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { MAX_SOCKETS_PER_PROCESS, defaultMaxSocketsPerProcess } from '../../src/modules/inapp/inapp.socket-caps.js';
import { CLOSE_TOO_MANY_SOCKETS } from '../../src/realtime/hub.js';
import { ManualClock, createTestContext } from '../helpers/context.js';
import { captureLogs } from '../helpers/log-capture.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { Client, inappSocketServer } from './inapp-ws-client.js';
import { RawWebsocket, maskedFrame } from './inapp-ws-raw-client.js';

const CAPS = { inappMaxSocketsPerEnvironment: 3, inappMaxSocketsPerProcess: 5 };
const ENVIRONMENT_FULL = { code: CLOSE_TOO_MANY_SOCKETS, reason: 'too many sockets for this environment' };
const PROCESS_FULL = { code: CLOSE_TOO_MANY_SOCKETS, reason: 'too many sockets in this server process' };

describe.each(STORAGE_KINDS)('in-app websocket caps per environment and per process (%s)', (kind) => {
  const logs = captureLogs('warn');
  const clock = new ManualClock();
  const server = inappSocketServer(kind, { config: CAPS, logger: logs.logger, clock });
  const realtime = () => server.t.deps.inappRealtime;
  const held = (envId?: string) => realtime().caps.held(envId);
  const envA = () => server.t.account.clientId;
  let envB = '';
  const otherEnv = async () => (envB ||= (await server.t.newAccount()).clientId);

  /** Opens sockets for new users of the environment and waits until the server holds them. */
  const open = async (envId: string, count: number): Promise<Client[]> => {
    const before = held(envId);
    const clients: Client[] = [];
    for (let i = 0; i < count; i++) clients.push(await server.connect(envId, `user-${randomUUID()}`));
    await vi.waitFor(() => expect(held(envId)).toBe(before + count));
    return clients;
  };
  const port = () => (server.t.app.server.address() as { port: number }).port;
  /**
   * How the server closes the next socket of the environment (it opens first: 101, then the close),
   * or 'accepted' (the server attaches a socket before its 101 reaches the client).
   */
  const refused = async (envId: string, query = `userId=user-${randomUUID()}`) => {
    const before = held(envId);
    const client = await Client.open(`ws://127.0.0.1:${port()}/?envId=${envId}&${query}`);
    server.clients.push(client);
    return held(envId) > before ? 'accepted' : client.closed;
  };

  afterEach(async () => {
    for (const client of server.clients.splice(0)) client.ws.terminate();
    await vi.waitFor(() => expect(held()).toBe(0));
    // Each test starts outside the previous one's minute of refusal logging.
    clock.advance(60_000);
    logs.lines.splice(0);
  });

  it('refuses the socket past the environment cap with 4008, keeps the open ones and the other environments, and accepts again once one closes', async () => {
    const first = await open(envA(), 3);
    expect(await refused(envA())).toEqual(ENVIRONMENT_FULL);
    expect(held(envA())).toBe(3);
    expect(first.every((c) => c.ws.readyState === WebSocket.OPEN)).toBe(true);

    // Another environment is not held back by this one's cap.
    const [other] = await open(await otherEnv(), 1);
    expect(other.ws.readyState).toBe(WebSocket.OPEN);

    first[0].ws.close();
    await first[0].closed;
    await vi.waitFor(() => expect(held(envA())).toBe(2));
    const userId = `again-${randomUUID()}`;
    const again = await server.connect(envA(), userId);
    await server.connected(envA(), userId, 1);
    await realtime().publish({ accountId: server.t.account.accountId, envId: envA(), userId }, [
      { id: randomUUID(), notificationId: 'comment', seen: false, title: 'Hi', date: '2026-01-15T10:00:00.000Z' },
    ]);
    await vi.waitFor(() => expect(again.messages).toBe(1));
  });

  it('refuses any socket past the process cap with 4008, whatever its environment, until one closes', async () => {
    const a = await open(envA(), 3);
    await open(await otherEnv(), 2);
    expect(held()).toBe(5);
    expect(await refused(envB)).toEqual(PROCESS_FULL);
    // The environment's own cap is named first when both are reached.
    expect(await refused(envA())).toEqual(ENVIRONMENT_FULL);

    a[0].ws.close();
    await vi.waitFor(() => expect(held()).toBe(4));
    await open(envB, 1);
    expect(await refused(envA())).toEqual(PROCESS_FULL);
  });

  it('gives a socket its place back however it ends: close, cut connection, bad frame, credentials change, refused peer that never answers', async () => {
    const [polite, cut] = await open(envA(), 2);
    const path = `/?envId=${envA()}&userId=raw-${randomUUID()}`;
    const bad = await RawWebsocket.open(port(), path);
    try {
      await vi.waitFor(() => expect(held(envA())).toBe(3));
      // A refused peer that never answers the close frame is cut off, not held for ws's 30 s.
      const silent = await RawWebsocket.open(port(), `/?envId=${envA()}&userId=silent-${randomUUID()}`);
      try {
        // Not attached: the server decides before its 101 reaches the client.
        expect(held(envA())).toBe(3);
        expect(await silent.closeFrame).toEqual(ENVIRONMENT_FULL);
        await silent.ended;
      } finally {
        silent.destroy();
      }

      polite.ws.close();
      cut.ws.terminate();
      bad.write(maskedFrame(0x3, Buffer.alloc(0)));
      await bad.ended;
      await vi.waitFor(() => expect(held()).toBe(0));
    } finally {
      bad.destroy();
    }

    const again = await open(envA(), 3);
    await realtime().closeEnvironment(server.t.account.accountId, envA());
    await Promise.all(again.map((c) => c.closed));
    await vi.waitFor(() => expect(held()).toBe(0));
    await open(envA(), 3);
  });

  it('logs refusals at warn at most once a minute per environment, with how many were refused, and no user or credential', async () => {
    // Environments of their own: no earlier test's refusals are counted in their lines.
    const full = (await server.t.newAccount()).clientId;
    const other = (await server.t.newAccount()).clientId;
    await open(full, 3);
    await open(other, 2);
    logs.lines.splice(0);
    const secretish = `hash-${randomUUID()}`;
    for (let i = 0; i < 6; i++) expect(await refused(full, `userId=flood-${i}&userIdHash=${secretish}`)).toEqual(ENVIRONMENT_FULL);
    expect(await refused(other)).toEqual(PROCESS_FULL);
    expect(await refused(other)).toEqual(PROCESS_FULL);

    const refusals = () => logs.lines.filter((line) => String(line.msg).startsWith('in-app websocket refused'));
    expect(refusals()).toEqual([
      expect.objectContaining({ level: 40, envId: full, cap: 'environment', limit: 3, refused: 1 }),
      expect.objectContaining({ level: 40, envId: other, cap: 'process', limit: 5, refused: 1 }),
    ]);
    expect(JSON.stringify(logs.lines)).not.toMatch(/flood-|hash-/);

    clock.advance(60_000);
    expect(await refused(full)).toEqual(ENVIRONMENT_FULL);
    expect(refusals()).toHaveLength(3);
    // The five refused since the first line, and this one.
    expect(refusals()[2]).toEqual(expect.objectContaining({ envId: full, cap: 'environment', refused: 6 }));
  });
});

describe.each(STORAGE_KINDS)('in-app websocket caps when the server stops (%s)', (kind) => {
  it('counts no socket once the server has stopped, a silent peer included', async () => {
    const t = await createTestContext(kind, { config: { ...CAPS, ...(kind === 'postgres' ? { databaseUrl: process.env.DATABASE_URL } : {}) } });
    const raw: RawWebsocket[] = [];
    try {
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = t.app.server.address() as { port: number };
      const path = () => `/?envId=${t.account.clientId}&userId=user-${randomUUID()}`;
      const polite = new WebSocket(`ws://127.0.0.1:${port}${path()}`);
      polite.on('error', () => undefined);
      raw.push(await RawWebsocket.open(port, path()), await RawWebsocket.open(port, path()));
      await vi.waitFor(() => expect(t.deps.inappRealtime.caps.held(t.account.clientId)).toBe(3));

      await t.app.close();
      expect(t.deps.inappRealtime.caps.held(t.account.clientId)).toBe(0);
      expect(t.deps.inappRealtime.caps.held()).toBe(0);
    } finally {
      for (const socket of raw) socket.destroy();
      await t.close();
    }
  });
});

describe('default process cap', () => {
  it('is 50,000, or three quarters of the open-file limit when that is lower', () => {
    expect(MAX_SOCKETS_PER_PROCESS).toBe(50_000);
    expect(defaultMaxSocketsPerProcess(undefined)).toBe(50_000);
    expect(defaultMaxSocketsPerProcess(1_048_576)).toBe(50_000);
    expect(defaultMaxSocketsPerProcess(20_000)).toBe(15_000);
    expect(defaultMaxSocketsPerProcess(1_024)).toBe(768);
  });
});

import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { Client } from './inapp-ws-client.js';
import { RawWebsocket } from './inapp-ws-raw-client.js';

const SHUTTING_DOWN = { code: 1001, reason: 'server shutting down' };

describe.each(STORAGE_KINDS)('in-app websockets when the server stops (%s)', (kind) => {
  const contexts: TestContext[] = [];
  const raw: RawWebsocket[] = [];
  afterEach(async () => {
    for (const socket of raw.splice(0)) socket.destroy();
    for (const t of contexts.splice(0)) await t.close();
  });

  /** A listening server of its own (each test stops it) and the in-app socket path of one user. */
  const server = async () => {
    const t = await createTestContext(kind, { config: kind === 'postgres' ? { databaseUrl: process.env.DATABASE_URL } : {} });
    contexts.push(t);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    const userId = `user-${randomUUID()}`;
    return {
      t,
      port: address.port,
      path: `/?envId=${t.account.clientId}&userId=${userId}`,
      connected: (count: number) => vi.waitFor(() => expect(t.deps.inappRealtime.connections(t.account.clientId, userId)).toBe(count)),
    };
  };

  it('closes every socket with 1001 "server shutting down"', async () => {
    const { t, port, path, connected } = await server();
    const clients = [await Client.open(`ws://127.0.0.1:${port}${path}`), await Client.open(`ws://127.0.0.1:${port}/ws${path.slice(1)}`)];
    await connected(2);

    await t.app.close();
    for (const client of clients) expect(await client.closed).toEqual(SHUTTING_DOWN);
  });

  // Without a bound, ws waits 30 s for the close handshake: past `docker stop`'s 10 s, before the
  // workers could release their jobs. Fails by the test's timeout when the socket holds the stop.
  it('cuts off a socket that never answers the close frame, so a client cannot hold the stop', { timeout: 15_000 }, async () => {
    const { t, port, path, connected } = await server();
    const silent = await RawWebsocket.open(port, path);
    raw.push(silent);
    const polite = await Client.open(`ws://127.0.0.1:${port}${path}`);
    await connected(2);

    const started = performance.now();
    await t.app.close();
    const elapsed = performance.now() - started;
    // The close frame came first (closeFrame resolves undefined for a connection cut without one), then the server ended the connection.
    expect(await silent.closeFrame).toEqual(SHUTTING_DOWN);
    await silent.ended;
    expect(await polite.closed).toEqual(SHUTTING_DOWN);
    // An upper bound only, far from the grace (about a second) and from ws's own 30 s.
    expect(elapsed).toBeLessThan(10_000);
  });
});

import { afterAll, beforeAll, expect, vi } from 'vitest';
import WebSocket from 'ws';
import type { Dialect } from '../../src/storage/db.js';
import { type TestContext, type TestContextOptions, createTestContext } from '../helpers/context.js';

/** A client socket that records the messages it reads and how it was closed. */
export class Client {
  messages = 0;
  readonly closed: Promise<{ code: number; reason: string }>;
  constructor(readonly ws: WebSocket) {
    ws.on('message', () => this.messages++);
    this.closed = new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
  }

  static open(url: string): Promise<Client> {
    const ws = new WebSocket(url);
    const client = new Client(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(client));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
      ws.once('error', reject);
    });
  }
}

/**
 * A listening test server for in-app websocket suites (registers its own beforeAll/afterAll).
 * On PostgreSQL the app gets a databaseUrl, so it LISTENs and changes made by another process
 * reach its sockets. `options` go to its test context (e.g. small socket caps, a log capture).
 */
export function inappSocketServer(kind: Dialect, options: TestContextOptions = {}) {
  const clients: Client[] = [];
  let base = '';
  const server = {
    t: undefined as unknown as TestContext,
    /** Sockets the suite opened itself (terminated after it). */
    clients,
    connect: async (envId: string, userId: string): Promise<Client> => {
      const client = await Client.open(`${base}/?envId=${envId}&userId=${encodeURIComponent(userId)}`);
      clients.push(client);
      return client;
    },
    /** Waits until this process holds `count` sockets of the user. */
    connected: (envId: string, userId: string, count: number) =>
      vi.waitFor(() => expect(server.t.deps.inappRealtime.connections(envId, userId)).toBe(count)),
  };
  beforeAll(async () => {
    const config = { ...(kind === 'postgres' ? { databaseUrl: process.env.DATABASE_URL } : {}), ...options.config };
    server.t = await createTestContext(kind, { ...options, config });
    await server.t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = server.t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    base = `ws://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    for (const client of clients) client.ws.terminate();
    await server.t.close();
  });
  return server;
}

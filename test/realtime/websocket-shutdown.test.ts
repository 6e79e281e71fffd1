import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { SocketHub } from '../../src/realtime/hub.js';
import { ensureWebsocketSupport } from '../../src/realtime/websocket.js';
import type { App } from '../../src/http/types.js';
import { Client } from '../e2e/inapp-ws-client.js';
import { RawWebsocket } from '../e2e/inapp-ws-raw-client.js';

const SHUTTING_DOWN = { code: 1001, reason: 'server shutting down' };

/** The address a listening server got on 127.0.0.1. */
const portOf = (address: ReturnType<WebSocketServer['address']> | null): number => {
  if (!address || typeof address === 'string') throw new Error('no address');
  return address.port;
};

describe('websockets when the server stops', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A Fastify app with one websocket route that only listens, as the in-app one does (and may authenticate, onRequest). */
  const app = async (shutdownGraceMs: number, onRequest: (url: string) => Promise<void> = async () => undefined) => {
    const server: App = Fastify().withTypeProvider<TypeBoxTypeProvider>();
    cleanups.push(() => server.close());
    await ensureWebsocketSupport(server, { shutdownGraceMs });
    server.route({ method: 'GET', url: '/socket', onRequest: (req) => onRequest(req.url), handler: () => 'not a websocket', wsHandler: () => undefined });
    await server.listen({ port: 0, host: '127.0.0.1' });
    return { server, port: portOf(server.server.address()) };
  };
  const raw = async (port: number, path: string) => {
    const socket = await RawWebsocket.open(port, path);
    cleanups.push(() => socket.destroy());
    return socket;
  };

  it('terminates a socket that has not answered its close frame within the grace', async () => {
    const { server, port } = await app(20);
    const silent = await raw(port, '/socket');
    const polite = await Client.open(`ws://127.0.0.1:${port}/socket`);
    await vi.waitFor(() => expect(server.websocketServer.clients.size).toBe(2));

    await server.close();
    // Without the bound the close waits for ws's 30 s close timeout: this test's timeout fails first.
    expect(await silent.closeFrame).toEqual(SHUTTING_DOWN);
    await silent.ended;
    expect(await polite.closed).toEqual(SHUTTING_DOWN);
  });

  it('does not wait for the grace when every socket answers', async () => {
    // A grace far beyond the test's timeout: the close must finish on the clients' answers.
    const { server, port } = await app(10 * 60_000);
    const clients = [await Client.open(`ws://127.0.0.1:${port}/socket`), await Client.open(`ws://127.0.0.1:${port}/socket`)];
    await vi.waitFor(() => expect(server.websocketServer.clients.size).toBe(2));

    await server.close();
    for (const client of clients) expect(await client.closed).toEqual(SHUTTING_DOWN);
    expect(server.websocketServer.clients.size).toBe(0);
  });

  it('refuses an upgrade that completes after the close started', async () => {
    let reach = () => undefined as void;
    const reached = new Promise<void>((resolve) => (reach = resolve));
    let release = () => undefined as void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // Holds the upgrade where the in-app route authenticates it, until the sockets have been closed.
    const { server, port } = await app(20, async () => {
      reach();
      await held;
    });
    const late = new WebSocket(`ws://127.0.0.1:${port}/socket`);
    const refused = new Promise<number>((resolve) => late.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)));
    late.on('error', () => undefined);
    await reached;
    // The websocket server says 'close' once it is closed and holds no socket: the shutdown's close is over.
    server.websocketServer.once('close', release);
    const closing = server.close();
    expect(await refused).toBe(503);
    await closing;
  });
});

describe('SocketHub.close', () => {
  it('closes its sockets with 1001 and terminates one that does not answer within the grace', async () => {
    const hub = new SocketHub({ shutdownGraceMs: 20 });
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    wss.on('connection', (socket) => hub.add('key', socket));
    await new Promise((resolve) => wss.once('listening', resolve));
    const silent = await RawWebsocket.open(portOf(wss.address()), '/');
    try {
      await vi.waitFor(() => expect(hub.count('key')).toBe(1));
      hub.close();
      expect(await silent.closeFrame).toEqual(SHUTTING_DOWN);
      await silent.ended;
      expect(hub.count('key')).toBe(0);
    } finally {
      silent.destroy();
      await new Promise((resolve) => wss.close(resolve));
    }
  });
});

describe('SocketHub closing one socket', () => {
  it('terminates a socket replaced over the per-user cap that does not answer its close frame within the grace', async () => {
    const hub = new SocketHub({ shutdownGraceMs: 20, maxSocketsPerKey: 1 });
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    wss.on('connection', (socket) => hub.add('key', socket));
    await new Promise((resolve) => wss.once('listening', resolve));
    const silent = await RawWebsocket.open(portOf(wss.address()), '/');
    let newer: RawWebsocket | undefined;
    try {
      await vi.waitFor(() => expect(hub.count('key')).toBe(1));
      newer = await RawWebsocket.open(portOf(wss.address()), '/');
      expect(await silent.closeFrame).toEqual({ code: 4008, reason: 'too many sockets for this user; oldest closed' });
      // Without the bound ws waits 30 s for the answer that never comes: this test's timeout fails first.
      await silent.ended;
      expect(hub.count('key')).toBe(1);
    } finally {
      silent.destroy();
      newer?.destroy();
      hub.close();
      await new Promise((resolve) => wss.close(resolve));
    }
  });
});

import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { buildDeps } from '../../src/deps.js';
import { EnvironmentsService } from '../../src/modules/environments/environments.service.js';
import { CLOSE_CREDENTIALS_CHANGED } from '../../src/modules/inapp/inapp.realtime.js';
import type { InappNotification } from '../../src/modules/inapp/inapp.service.js';
import type { Storage } from '../../src/storage/db.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { Client, inappSocketServer } from './inapp-ws-client.js';

describe.each(STORAGE_KINDS)('in-app websockets closed when environment credentials change (%s)', (kind) => {
  const server = inappSocketServer(kind);
  const { clients, connect, connected } = server;
  const realtime = () => server.t.deps.inappRealtime;
  const notification = (): InappNotification => ({ id: randomUUID(), notificationId: 'comment', seen: false, title: 'New comment', date: '2026-01-15T10:00:00.000Z' });
  const newEnvironment = async () => {
    const res = await server.t.app.inject({ method: 'POST', url: '/environments', headers: server.t.auth, payload: { title: `env-${randomUUID()}` } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().clientId as string;
  };

  it('closes an environment\'s sockets with 4003 when secure mode is switched on, and only that environment\'s', async () => {
    const envA = await newEnvironment();
    const envB = await newEnvironment();
    const user = `secure-${randomUUID()}`;
    const inA = [await connect(envA, user), await connect(envA, `${user}-2`)];
    const inB = await connect(envB, user);
    await connected(envA, user, 1);
    await connected(envB, user, 1);

    const res = await server.t.app.inject({ method: 'PATCH', url: `/environments/${envA}`, headers: server.t.auth, payload: { secureMode: true } });
    expect(res.statusCode, res.body).toBe(200);
    for (const client of inA) expect((await client.closed).code).toBe(CLOSE_CREDENTIALS_CHANGED);
    expect(realtime().connections(envA, user)).toBe(0);

    expect(inB.ws.readyState).toBe(WebSocket.OPEN);
    await realtime().publish({ accountId: server.t.account.accountId, envId: envB, userId: user }, [notification()]);
    await vi.waitFor(() => expect(inB.messages).toBe(1));
    // A title change closes nothing.
    expect((await server.t.app.inject({ method: 'PATCH', url: `/environments/${envB}`, headers: server.t.auth, payload: { title: 'renamed' } })).statusCode).toBe(200);
    expect(realtime().connections(envB, user)).toBe(1);
  });

  it('closes an environment\'s sockets with 4003 when its secret is reset', async () => {
    const envId = await newEnvironment();
    const other = await newEnvironment();
    const user = `reset-${randomUUID()}`;
    const client = await connect(envId, user);
    const bystander = await connect(other, user);
    await connected(envId, user, 1);
    await connected(other, user, 1);
    const res = await server.t.app.inject({ method: 'PATCH', url: `/environments/${envId}`, headers: server.t.auth, payload: { resetSecret: true } });
    expect(res.statusCode, res.body).toBe(200);
    expect((await client.closed).code).toBe(CLOSE_CREDENTIALS_CHANGED);
    expect(realtime().connections(envId, user)).toBe(0);
    expect(bystander.ws.readyState).toBe(WebSocket.OPEN);
    expect(realtime().connections(other, user)).toBe(1);
  });

  it('closes a socket authenticated before the change but attached after it (the close found nothing to close)', async () => {
    const { WebSocketServer } = await import('ws');
    const envId = await newEnvironment();
    const user = `late-${randomUUID()}`;
    const scope = { accountId: server.t.account.accountId, envId, userId: user };
    // As the websocket route does: the epoch is read before authenticating, then the PATCH lands.
    const before = realtime().credentialsEpoch(envId);
    await realtime().closeEnvironment(server.t.account.accountId, envId);
    const after = realtime().credentialsEpoch(envId);
    const bare = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    bare.on('connection', (socket, req) => realtime().attach(scope, socket, req.url?.includes('late') ? before : after));
    await new Promise((resolve) => bare.once('listening', resolve));
    const { port } = bare.address() as { port: number };
    try {
      const late = await Client.open(`ws://127.0.0.1:${port}/?late`);
      expect((await late.closed).code).toBe(CLOSE_CREDENTIALS_CHANGED);
      const fresh = await Client.open(`ws://127.0.0.1:${port}/?fresh`);
      clients.push(fresh);
      await connected(envId, user, 1);
      expect(fresh.ws.readyState).toBe(WebSocket.OPEN);
    } finally {
      for (const client of bare.clients) client.terminate();
      await new Promise((resolve) => bare.close(resolve));
    }
  });

  // Another process's PATCH reaches this process's sockets over LISTEN/NOTIFY.
  if (kind === 'postgres') it('closes sockets held by another process when that process switches secure mode on', async () => {
    const envId = await newEnvironment();
    const other = await newEnvironment();
    const user = `remote-${randomUUID()}`;
    const client = await connect(envId, user);
    const bystander = await connect(other, user);
    await connected(envId, user, 1);

    const otherStorage: Storage = server.t.storage.reopen();
    const otherDeps = buildDeps(server.t.deps.config, { storage: otherStorage, logger: pino({ level: 'silent' }), secrets: server.t.deps.secrets });
    try {
      expect(otherDeps.inappRealtime).not.toBe(realtime());
      await new EnvironmentsService(otherDeps).update(server.t.account.accountId, envId, { secureMode: true });
      expect((await client.closed).code).toBe(CLOSE_CREDENTIALS_CHANGED);
      expect(realtime().connections(envId, user)).toBe(0);
      // Its NOTIFY and a later push went through the same LISTEN connection, in order.
      await otherDeps.inappRealtime.publish({ accountId: server.t.account.accountId, envId: other, userId: user }, [notification()]);
      await vi.waitFor(() => expect(bystander.messages).toBe(1));
      expect(bystander.ws.readyState).toBe(WebSocket.OPEN);
    } finally {
      await otherDeps.inappRealtime.close();
      await otherStorage.close();
    }
  });
});

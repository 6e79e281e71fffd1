import { randomBytes, randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { buildDeps } from '../../src/deps.js';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { InappService, type StoreInappInput } from '../../src/modules/inapp/inapp.service.js';
import { Secrets } from '../../src/secrets.js';
import type { Storage } from '../../src/storage/db.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

interface Received {
  route: string;
  payload: { notifications: Array<Record<string, unknown>> };
}

/** A websocket client that connects the way the published in-app client does, recording every message. */
class InappSocket {
  readonly messages: Received[] = [];
  private waiters: Array<() => void> = [];
  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      // A text frame arrives as one Buffer (ws's default binaryType, nodebuffer).
      this.messages.push(JSON.parse((data as Buffer).toString('utf8')) as Received);
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  static open(url: string): Promise<InappSocket> {
    const ws = new WebSocket(url);
    const socket = new InappSocket(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(socket));
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
      ws.once('error', reject);
    });
  }

  async nextCount(n: number): Promise<Received[]> {
    while (this.messages.length < n) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`expected ${n} messages, have ${this.messages.length}`)), 5000);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.messages.slice(0, n);
  }

  close(): void {
    this.ws.close();
  }
}

describe.each(STORAGE_KINDS)('in-app websocket (%s)', (kind) => {
  let t: TestContext;
  let service: InappService;
  let base: string;
  const sockets: InappSocket[] = [];

  beforeAll(async () => {
    // With a databaseUrl the app LISTENs for notifications stored by other processes.
    t = await createTestContext(kind, { config: kind === 'postgres' ? { databaseUrl: process.env.DATABASE_URL } : {} });
    service = new InappService(t.deps);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const address = t.app.server.address();
    if (!address || typeof address === 'string') throw new Error('no address');
    base = `ws://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await t.close();
  });

  const connect = async (query: string, path = '/') => {
    const socket = await InappSocket.open(`${base}${path}?${query}`);
    sockets.push(socket);
    return socket;
  };
  const input = (userId: string, extra: Partial<StoreInappInput> = {}): StoreInappInput => ({
    accountId: t.account.accountId,
    envId: t.account.clientId,
    userId,
    trackingId: randomUUID(),
    notificationId: 'comment',
    title: 'New comment',
    ...extra,
  });
  const connected = (userId: string, count: number, envId = t.account.clientId) =>
    vi.waitFor(() => expect(t.deps.inappRealtime.connections(envId, userId)).toBe(count));

  /** A user's socket on this process, and `run` in a second "process" (its own pool and in-app realtime, no sockets of its own). */
  const withOtherProcess = async (user: string, run: (socket: InappSocket, other: ReturnType<typeof buildDeps>) => Promise<void>) => {
    const socket = await connect(`userId=${user}&envId=${t.account.clientId}`);
    await connected(user, 1);
    const otherStorage: Storage = t.storage.reopen();
    const otherDeps = buildDeps(t.deps.config, { storage: otherStorage, logger: pino({ level: 'silent' }), secrets: new Secrets(randomBytes(32)) });
    try {
      await run(socket, otherDeps);
    } finally {
      await otherDeps.inappRealtime.close();
      await otherStorage.close();
    }
  };

  it('pushes a stored notification to the user\'s sockets, and nothing to another user', async () => {
    const alice = `alice-${randomUUID()}`;
    const bob = `bob-${randomUUID()}`;
    const aliceTab1 = await connect(`userId=${encodeURIComponent(alice)}&envId=${t.account.clientId}`);
    const aliceTab2 = await connect(`userId=${encodeURIComponent(alice)}&envId=${t.account.clientId}`, '/ws');
    const bobSocket = await connect(`userId=${encodeURIComponent(bob)}&envId=${t.account.clientId}`);
    await connected(alice, 2);

    const stored = await service.store(t.deps.db, input(alice, { trackingId: 'ws-1', redirectURL: 'https://app.example/c/1', parameters: { by: 'Bob' } }));
    await service.publish(input(alice), [stored.notification]);

    for (const tab of [aliceTab1, aliceTab2]) {
      const [message] = await tab.nextCount(1);
      expect(message).toEqual({ route: 'inapp_web/new_notifications', payload: { notifications: [stored.notification] } });
      expect(message.payload.notifications[0]).toMatchObject({ id: 'ws-1', title: 'New comment', seen: false, redirectURL: 'https://app.example/c/1', parameters: { by: 'Bob' } });
    }
    // Messages to one socket arrive in order: Bob's first message must be Bob's own notification.
    const forBob = await service.deliver(input(bob, { trackingId: 'ws-bob' }));
    const [bobMessage] = await bobSocket.nextCount(1);
    expect(bobMessage.payload.notifications).toEqual([forBob.notification]);
    expect(aliceTab1.messages).toHaveLength(1);
  });

  it('deliver() publishes once, and not again for a retried (duplicate) store', async () => {
    const carol = `carol-${randomUUID()}`;
    const socket = await connect(`userId=${carol}&envId=${t.account.clientId}`);
    await connected(carol, 1);
    const first = await service.deliver(input(carol, { trackingId: 'dup' }));
    const retry = await service.deliver(input(carol, { trackingId: 'dup', title: 'retried' }));
    expect(retry.created).toBe(false);
    const next = await service.deliver(input(carol, { trackingId: 'after-dup' }));
    const messages = await socket.nextCount(2);
    expect(messages.map((m) => m.payload.notifications[0].id)).toEqual([first.notification.id, next.notification.id]);
  });

  it('refuses a socket without valid credentials, and checks the user hash in secure mode', async () => {
    const refused = (query: string) => expect(InappSocket.open(`${base}/?${query}`)).rejects.toThrow('HTTP 401');
    await refused('userId=someone');
    await refused(`envId=${t.account.clientId}`);
    await refused('userId=someone&envId=unknown-client');

    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Secure' } })).json();
    await t.app.inject({ method: 'PATCH', url: `/environments/${env.clientId}`, headers: t.auth, payload: { secureMode: true } });
    const dave = 'dave+1@example.com';
    await refused(`userId=${encodeURIComponent(dave)}&envId=${env.clientId}`);
    await refused(`userId=${encodeURIComponent(dave)}&envId=${env.clientId}&userIdHash=${encodeURIComponent(userHash(env.clientSecret, 'other'))}`);

    const socket = await connect(`userId=${encodeURIComponent(dave)}&envId=${env.clientId}&userIdHash=${encodeURIComponent(userHash(env.clientSecret, dave))}`);
    await connected(dave, 1, env.clientId);
    const stored = await service.deliver(input(dave, { envId: env.clientId, trackingId: 'secure-1' }));
    expect((await socket.nextCount(1))[0].payload.notifications).toEqual([stored.notification]);
  });

  it('forgets a socket when it closes', async () => {
    const erin = `erin-${randomUUID()}`;
    const socket = await connect(`userId=${erin}&envId=${t.account.clientId}`);
    await connected(erin, 1);
    socket.close();
    await connected(erin, 0);
  });

  it('answers a plain GET / with the Error body', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('ROUTE_NOT_FOUND');
  });

  // Cross-process fan-out exists only on PostgreSQL (one process owns an SQLite file).
  if (kind === 'postgres') it('reaches sockets held by another process over LISTEN/NOTIFY, large payloads included', async () => {
    const frank = `frank-${randomUUID()}`;
    await withOtherProcess(frank, async (socket, otherDeps) => {
      const worker = new InappService(otherDeps);
      expect(otherDeps.inappRealtime).not.toBe(t.deps.inappRealtime);
      const small = await worker.deliver(input(frank, { trackingId: 'remote-small' }));
      // Over PostgreSQL's NOTIFY limit: only the id crosses, the listener reads the row back.
      const big = await worker.deliver(input(frank, { trackingId: 'remote-big', parameters: { blob: 'x'.repeat(20_000) } }));
      // This process's own publish reaches its socket directly, and its NOTIFY echo is skipped.
      const local = await service.deliver(input(frank, { trackingId: 'local' }));
      const marker = await worker.deliver(input(frank, { trackingId: 'marker' }));

      const messages = await socket.nextCount(4);
      const ids = messages.map((m) => m.payload.notifications.map((n) => n.id).join());
      expect([...ids].sort()).toEqual(['local', 'marker', 'remote-big', 'remote-small']);
      expect(ids.indexOf('remote-small')).toBeLessThan(ids.indexOf('remote-big'));
      expect(ids.indexOf('remote-big')).toBeLessThan(ids.indexOf('marker'));
      const byId = Object.fromEntries(messages.map((m) => [m.payload.notifications[0].id, m.payload.notifications[0]]));
      expect(byId['remote-small']).toEqual(small.notification);
      expect(byId['remote-big']).toEqual(big.notification);
      expect(byId.local).toEqual(local.notification);
      expect(byId.marker).toEqual(marker.notification);
      // The marker came through the LISTEN connection after every earlier NOTIFY: no echo duplicated "local".
      expect(socket.messages).toHaveLength(4);
    });
  });

  if (kind === 'postgres') it('sends the NOTIFYs of concurrent publishes (a delivery batch after its commit) in one statement, in the order published', async () => {
    const gina = `gina-${randomUUID()}`;
    await withOtherProcess(gina, async (socket, otherDeps) => {
      const first = await new InappService(otherDeps).deliver(input(gina, { trackingId: 'batch-00' }));
      const executor = otherDeps.db.getExecutor();
      const executed = vi.spyOn(executor, 'executeQuery');
      const scope = { accountId: t.account.accountId, envId: t.account.clientId, userId: gina };
      const ids = Array.from({ length: 12 }, (_, i) => `batch-${String(i + 1).padStart(2, '0')}`);
      await Promise.all(ids.map((id) => otherDeps.inappRealtime.publish(scope, [{ ...first.notification, id }])));
      const notifies = executed.mock.calls.filter(([query]) => query.sql.includes('pg_notify'));
      executed.mockRestore();
      expect(notifies).toHaveLength(1);
      const messages = await socket.nextCount(13);
      expect(messages.map((m) => m.payload.notifications[0].id)).toEqual(['batch-00', ...ids]);
    });
  });
});

describe('socket hub heartbeat', () => {
  it('terminates a peer that stops answering pings and keeps one that answers', async () => {
    const { WebSocketServer } = await import('ws');
    const { SocketHub } = await import('../../src/realtime/hub.js');
    const hub = new SocketHub({ heartbeatMs: 100 });
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    server.on('connection', (socket, req) => hub.add(new URL(req.url ?? '/', 'http://x').searchParams.get('k') ?? '', socket));
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as { port: number };
    const open = (k: string, autoPong: boolean) =>
      new Promise<WebSocket>((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/?k=${k}`, { autoPong });
        ws.once('open', () => resolve(ws));
        ws.once('error', reject);
      });
    const silent = await open('silent', false);
    const healthy = await open('healthy', true);
    try {
      await vi.waitFor(() => expect(hub.count('silent') + hub.count('healthy')).toBe(2));
      const closed = new Promise<void>((resolve) => silent.once('close', () => resolve()));
      await closed;
      expect(hub.count('silent')).toBe(0);
      expect(hub.count('healthy')).toBe(1);
      expect(hub.send('healthy', 'still here')).toBe(1);
    } finally {
      healthy.close();
      hub.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

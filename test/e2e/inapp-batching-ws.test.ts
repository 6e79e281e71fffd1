// The websocket sees in-app batches change: the published in-app client (@notificationapi/core)
// gets each update of a batch as `inapp_web/new_notifications` carrying the batch's notification
// (same id, latest state), pushed as stored when the push goes out, in this process and (on
// PostgreSQL) in another one.
import { randomBytes, randomUUID } from 'node:crypto';
import { NotificationAPIClientSDK } from '@notificationapi/core';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { buildDeps } from '../../src/deps.js';
import { batchCopyRenderer } from '../../src/modules/inapp/inapp.batching.js';
import { InappService, type InappScope } from '../../src/modules/inapp/inapp.service.js';
import { RenderPool } from '../../src/rendering/render-pool.js';
import { Secrets } from '../../src/secrets.js';
import type { Storage } from '../../src/storage/db.js';
import { type ClientCall, plainUrl, routeClientFetch } from '../helpers/client-fetch.js';
import { type TestContext, ManualClock, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

interface Pushed {
  id: string;
  title: string;
  parameters?: { _count?: number };
}

class PlainWebSocket extends WebSocket {
  constructor(url: string) {
    super(plainUrl(url));
  }
}

const BATCH = { key: 'post-1', windowMs: 60_000, template: { title: '{{ _count }} new comments', redirectURL: '', imageURL: '' } };

describe.each(STORAGE_KINDS)('in-app batch updates over the websocket (%s)', (kind) => {
  let t: TestContext;
  let host: string;
  let restoreFetch: () => void;
  const calls: ClientCall[] = [];
  const clock = new ManualClock(new Date('2026-03-02T09:00:00.000Z'));
  const renders = new RenderPool({ size: 1 });
  /** What the in-app executor does with a batched send: counted in a transaction, its batch copy written after. */
  const storeBatched = async (inapp: InappService, scope: InappScope, trackingId: string, by: string) => {
    const stored = await inapp.transaction((trx) => inapp.storeBatched(trx, { ...scope, trackingId, notificationId: 'comment', title: `${by} commented`, parameters: { by }, batch: BATCH }));
    if (stored.pendingCopy) await inapp.writeBatchCopy(scope, stored.pendingCopy, batchCopyRenderer(renders));
    return stored;
  };

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true, clock, config: kind === 'postgres' ? { databaseUrl: process.env.DATABASE_URL } : {} });
    ({ host, restore: restoreFetch } = await routeClientFetch(t.app, calls));
    (globalThis as { WebSocket?: unknown }).WebSocket = PlainWebSocket;
    const options = { INAPP_WEB: { defaultDeliveryOption: 'instant', instant: { enabled: true, batching: true, batchingKey: '{{ parameters.postId }}', batchingWindow: 60_000 } } };
    expect((await t.app.inject({ method: 'POST', url: '/types', headers: t.auth, payload: { notificationId: 'comment', title: 'Comments', channels: ['INAPP_WEB'], options } })).statusCode).toBe(200);
    const template = { templateId: 'main', title: '{{ by }} commented', batch: { title: '{{ _count }} new comments (latest by {{ by }})', redirectURL: 'https://app.example/p/{{ postId }}', imageURL: '' } };
    expect((await t.app.inject({ method: 'POST', url: '/notifications/comment/INAPP_WEB/templates', headers: t.auth, payload: template })).statusCode).toBe(200);
  });
  afterEach(() => {
    NotificationAPIClientSDK.websocket.disconnect();
  });
  afterAll(async () => {
    restoreFetch();
    delete (globalThis as { WebSocket?: unknown }).WebSocket;
    await renders.close();
    await t.close();
  });

  /** The published client, its websocket open, recording what it is told. */
  const openClient = async (userId: string): Promise<Pushed[]> => {
    const received: Pushed[] = [];
    const client = NotificationAPIClientSDK.init({
      clientId: t.account.clientId,
      userId,
      host,
      websocketHost: host,
      onNewInAppNotifications: (notifications: unknown[]) => received.push(...(notifications as Pushed[])),
    });
    client.openWebSocket();
    await vi.waitFor(() => expect(t.deps.inappRealtime.connections(t.account.clientId, userId)).toBe(1));
    return received;
  };
  const send = async (userId: string, by: string): Promise<string> => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'comment', to: { id: userId }, parameters: { postId: 'p1', by } } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ trackingId: string }>().trackingId;
  };

  it('tells the published client each time a batch counts a send, with the same id and the new copy', async () => {
    const userId = `ada-${randomUUID()}`;
    const received = await openClient(userId);
    const first = await send(userId, 'Bob');
    await vi.waitFor(() => expect(received).toHaveLength(1), { timeout: 10_000 });
    for (const [i, by] of ['Cy', 'Di'].entries()) {
      await send(userId, by);
      await vi.waitFor(() => expect(received).toHaveLength(i + 2), { timeout: 10_000 });
    }
    expect(received.map((n) => [n.id, n.title, n.parameters?._count])).toEqual([
      [first, 'Bob commented', 1],
      [first, '2 new comments (latest by Cy)', 2],
      [first, '3 new comments (latest by Di)', 3],
    ]);
    expect(received[2]).toMatchObject({ redirectURL: 'https://app.example/p/p1', seen: false, notificationId: 'comment' });
  });

  it('pushes the batch as stored when the push goes out: a late push of an earlier update shows the latest state', async () => {
    const userId = `bea-${randomUUID()}`;
    const received = await openClient(userId);
    const scope = { accountId: t.account.accountId, envId: t.account.clientId, userId };
    const store = (trackingId: string, by: string) => storeBatched(t.services.inapp, scope, trackingId, by);
    const older = await store(randomUUID(), 'A');
    await store(randomUUID(), 'B');
    // The first update's push runs only now, after the second committed.
    await t.services.inapp.publishChanged(scope, [older.batchId]);
    await vi.waitFor(() => expect(received).toHaveLength(1));
    expect(received[0]).toMatchObject({ id: older.batchId, title: '2 new comments', parameters: { _count: 2 } });
  });

  // Cross-process fan-out exists only on PostgreSQL (one process owns an SQLite file).
  if (kind === 'postgres') it('reaches a socket held by another process: the update crosses as an id and is read there', async () => {
    const userId = `cal-${randomUUID()}`;
    const received = await openClient(userId);
    const otherStorage: Storage = t.storage.reopen();
    const otherDeps = buildDeps(t.deps.config, { storage: otherStorage, logger: pino({ level: 'silent' }), secrets: new Secrets(randomBytes(32)) });
    try {
      const other = new InappService(otherDeps);
      const scope = { accountId: t.account.accountId, envId: t.account.clientId, userId };
      for (const by of ['A', 'B']) {
        const stored = await storeBatched(other, scope, randomUUID(), by);
        await other.publishChanged(scope, [stored.batchId]);
        await vi.waitFor(() => expect(received.at(-1)?.parameters?._count).toBe(stored.count), { timeout: 10_000 });
      }
      expect(received.map((n) => n.title)).toEqual(['A commented', '2 new comments']);
      expect(new Set(received.map((n) => n.id)).size).toBe(1);
    } finally {
      await otherDeps.inappRealtime.close();
      await otherStorage.close();
    }
  });
});

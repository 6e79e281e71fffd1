// Sub-notifications and retract through the clients against the listening server, on both
// engines, with the delivery workers:
// - the older server SDK notificationapi-node-server-sdk (the real package, init with baseURL):
//   createSubNotification, deleteSubNotification, retract and send;
// - the published in-app client @notificationapi/core reads the preferences and notifications;
// - a websocket connected as the in-app client is told of a retract, also from another process
//   over LISTEN/NOTIFY on PostgreSQL.
import { randomBytes } from 'node:crypto';
import { NotificationAPIClientSDK } from '@notificationapi/core';
import notificationapi from 'notificationapi-node-server-sdk';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { buildDeps } from '../../src/deps.js';
import { RetractService } from '../../src/modules/sending/retract.service.js';
import { Secrets } from '../../src/secrets.js';
import { type ClientCall, routeClientFetch } from '../helpers/client-fetch.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

interface Pushed {
  route: string;
  payload: { trackingIds?: string[]; notifications?: { id: string }[] };
}

/** A websocket connected as the in-app client connects, recording what it is told. */
async function openSocket(url: string): Promise<{ messages: Pushed[]; close: () => void }> {
  const ws = new WebSocket(url);
  const messages: Pushed[] = [];
  ws.on('message', (data) => messages.push(JSON.parse((data as Buffer).toString('utf8')) as Pushed));
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  return { messages, close: () => ws.close() };
}

describe.each(STORAGE_KINDS)('sub-notifications and retract through the clients (%s)', (kind) => {
  let t: TestContext;
  let host = '';
  const sdk = notificationapi;
  let restoreFetch: () => void;
  const calls: ClientCall[] = [];
  const sockets: { close: () => void }[] = [];
  const user = 'ada@example.com';
  const inappClient = () => NotificationAPIClientSDK.init({ clientId: t.account.clientId, userId: user, host });
  const socketUrl = (userId: string) => `ws://${host}/?envId=${t.account.clientId}&userId=${encodeURIComponent(userId)}`;

  /** Sends through the older SDK and waits for its routing. */
  async function send(subNotificationId: string): Promise<{ trackingId: string; log: Record<string, unknown> }> {
    const res = await sdk.send({ notificationId: 'comments', user: { id: user, email: user }, subNotificationId, email: { subject: 'New comment', html: '<p>Hi</p>' }, inapp: { title: `On ${subNotificationId}` } });
    expect(res.status).toBe(200);
    const { trackingId } = res.data as { trackingId: string };
    const log = await eventually(async () => {
      const record = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json<{ logs: Record<string, unknown>[] }>().logs[0];
      return record?.inapp_delivered_at && record.email_routing ? record : undefined;
    }, 10_000, `routing of ${trackingId}`);
    return { trackingId, log };
  }

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true, config: kind === 'postgres' ? { databaseUrl: process.env.DATABASE_URL } : {} });
    ({ host, restore: restoreFetch } = await routeClientFetch(t.app, calls));
    sdk.init(t.account.clientId, t.account.clientSecret, { baseURL: `http://${host}` });
    const type = await t.app.inject({ method: 'POST', url: '/types', headers: t.auth, payload: { notificationId: 'comments', title: 'Comments', channels: ['EMAIL', 'INAPP_WEB'] } });
    expect(type.statusCode).toBe(200);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    restoreFetch();
    await t.close();
  });

  it("createSubNotification lists it for the in-app client; sends follow its preferences; deleteSubNotification removes both", async () => {
    const created = await sdk.createSubNotification({ notificationId: 'comments', subNotificationId: 'post-9', title: 'Post 9' });
    expect(created.status).toBe(200);
    const client = inappClient();
    expect((await client.getPreferences()).subNotifications).toEqual([{ notificationId: 'comments', subNotificationId: 'post-9', title: 'Post 9' }]);

    await client.updateDeliveryOption({ notificationId: 'comments', subNotificationId: 'post-9', channel: 'EMAIL', delivery: 'off' });
    expect((await send('post-9')).log).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED', inapp_routing: 'SEND' });
    expect((await send('post-10')).log).toMatchObject({ email_routing: 'SEND', inapp_routing: 'SEND' });

    const deleted = await sdk.deleteSubNotification({ notificationId: 'comments', subNotificationId: 'post-9' });
    expect(deleted.status).toBe(200);
    expect(deleted.data).toEqual({ success: true, deletedPreferences: 1 });
    const after = await client.getPreferences();
    expect(after.subNotifications).toEqual([]);
    expect(after.preferences).toEqual([]);
    // Its option is gone with it: a send naming it follows the type's default again.
    expect((await send('post-9')).log).toMatchObject({ email_routing: 'SEND' });
  });

  it('retract removes the in-app notifications and tells the connected in-app client which', async () => {
    const socket = await openSocket(socketUrl(user));
    sockets.push(socket);
    await vi.waitFor(() => expect(t.deps.inappRealtime.connections(t.account.clientId, user)).toBe(1));
    const client = inappClient();
    const before = (await client.getInAppNotifications({ before: new Date(Date.now() + 60_000).toISOString(), maxCountNeeded: 100 })).items.map((n: { id: string }) => n.id);
    expect(before.length).toBeGreaterThanOrEqual(3);

    const { trackingId } = await send('post-11');
    const res = await sdk.retract({ notificationId: 'comments', userId: user, secondaryId: 'post-11' });
    expect(res.status).toBe(200);
    expect(res.data).toMatchObject({ trackingIds: [trackingId], inappNotifications: 1 });
    await vi.waitFor(() => expect(socket.messages.filter((m) => m.route === 'inapp_web/retracted_notifications')).toEqual([{ route: 'inapp_web/retracted_notifications', payload: { trackingIds: [trackingId] } }]));
    const listed = (await client.getInAppNotifications({ before: new Date(Date.now() + 60_000).toISOString(), maxCountNeeded: 100 })).items.map((n: { id: string }) => n.id);
    expect(listed).not.toContain(trackingId);
    expect(listed.sort()).toEqual(before.sort());

    // All of the type: the rest go, and the socket hears of each.
    const all = await sdk.retract({ notificationId: 'comments', userId: user });
    expect((all.data as { inappNotifications: number }).inappNotifications).toBe(before.length);
    await vi.waitFor(() => expect(socket.messages.filter((m) => m.route === 'inapp_web/retracted_notifications').flatMap((m) => m.payload.trackingIds).sort()).toEqual([trackingId, ...before].sort()));
    expect((await client.getInAppNotifications({ before: new Date(Date.now() + 60_000).toISOString(), maxCountNeeded: 100 })).items).toEqual([]);
  });

  if (kind === 'postgres') it('a retract made by another process reaches the socket over LISTEN/NOTIFY', async () => {
    const bob = 'bob-remote';
    const socket = await openSocket(socketUrl(bob));
    sockets.push(socket);
    await vi.waitFor(() => expect(t.deps.inappRealtime.connections(t.account.clientId, bob)).toBe(1));
    const stored = await t.services.inapp.deliver({ accountId: t.account.accountId, envId: t.account.clientId, userId: bob, trackingId: 'remote-retract', notificationId: 'comments', title: 'Hi' });
    await vi.waitFor(() => expect(socket.messages).toHaveLength(1));

    // A second "process": its own pool and in-app realtime, no sockets of its own.
    const otherStorage = t.storage.reopen();
    const otherDeps = buildDeps(t.deps.config, { storage: otherStorage, logger: pino({ level: 'silent' }), secrets: new Secrets(randomBytes(32)) });
    try {
      const result = await new RetractService(otherDeps).retract({ accountId: t.account.accountId, envId: t.account.clientId }, { notificationId: 'comments', userId: bob });
      expect(result.inappNotifications).toBe(1);
      await vi.waitFor(() => expect(socket.messages[1]).toEqual({ route: 'inapp_web/retracted_notifications', payload: { trackingIds: [stored.notification.id] } }));
    } finally {
      await otherDeps.inappRealtime.close();
      await otherStorage.close();
    }
  });
});

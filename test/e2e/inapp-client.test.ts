import { randomUUID } from 'node:crypto';
import { NotificationAPIClientSDK } from '@notificationapi/core';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { userHash } from '../../src/modules/inapp/inapp.auth.js';
import { InappService, type StoreInappInput } from '../../src/modules/inapp/inapp.service.js';
import { type ClientCall, plainUrl, routeClientFetch } from '../helpers/client-fetch.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/**
 * The published client always builds `https://<host>/...` and `wss://<websocketHost>?...`; host
 * and websocketHost are settings, the scheme is not. Clarion serves plain HTTP here (TLS belongs to
 * the reverse proxy), so the test transport swaps only the scheme: method, path, query, headers
 * and body are exactly what the client sends. Every URL it used is recorded.
 */
/** The package's typings do not resolve under NodeNext (extensionless re-export), so name what the test reads. */
interface ClientNotification {
  id: string;
  opened?: string;
  archived?: string;
}

const calls: ClientCall[] = [];

class PlainWebSocket extends WebSocket {
  static opened: string[] = [];
  constructor(url: string) {
    PlainWebSocket.opened.push(url);
    super(plainUrl(url));
  }
}

describe.each(STORAGE_KINDS)('published in-app client @notificationapi/core (%s)', (kind) => {
  let t: TestContext;
  let service: InappService;
  let host: string;
  let restoreFetch: () => void;

  beforeAll(async () => {
    t = await createTestContext(kind);
    service = new InappService(t.deps);
    ({ host, restore: restoreFetch } = await routeClientFetch(t.app, calls));
    (globalThis as { WebSocket?: unknown }).WebSocket = PlainWebSocket;
  });
  afterEach(() => {
    NotificationAPIClientSDK.websocket.disconnect();
  });
  afterAll(async () => {
    restoreFetch();
    delete (globalThis as { WebSocket?: unknown }).WebSocket;
    await t.close();
  });

  const input = (envId: string, userId: string, extra: Partial<StoreInappInput>): StoreInappInput => ({
    accountId: t.account.accountId,
    envId,
    userId,
    trackingId: randomUUID(),
    notificationId: 'mention',
    title: 'You were mentioned',
    ...extra,
  });

  it('lists, pages and patches notifications, and receives new ones over its websocket', async () => {
    const userId = `ada-${randomUUID()}@example.com`;
    const hour = 3600_000;
    const now = Date.now();
    for (const [i, id] of ['c1', 'c2', 'c3'].entries()) {
      await service.store(t.deps.db, input(t.account.clientId, userId, { trackingId: id, date: new Date(now - (3 - i) * hour).toISOString(), redirectURL: `https://app.example/${id}` }));
    }
    const received: unknown[] = [];
    const client = NotificationAPIClientSDK.init({
      clientId: t.account.clientId,
      userId,
      host,
      websocketHost: host,
      onNewInAppNotifications: (notifications: unknown[]) => received.push(...notifications),
    });
    calls.length = 0;

    // A first page of two, then the rest from where it stopped.
    const first = await client.getInAppNotifications({ before: new Date(now).toISOString(), maxCountNeeded: 2 });
    expect(first.items.map((n: ClientNotification) => n.id)).toEqual(['c3', 'c2']);
    expect(first.hasMore).toBe(true);
    const rest = await client.getInAppNotifications({ before: first.oldestReceived, maxCountNeeded: 10 });
    expect(rest.items.map((n: ClientNotification) => n.id)).toEqual(['c1']);
    expect(rest.hasMore).toBe(false);
    expect(rest.items[0]).toMatchObject({ title: 'You were mentioned', seen: false, redirectURL: 'https://app.example/c1', notificationId: 'mention' });

    const basic = `Basic ${Buffer.from(`${t.account.clientId}:${userId}`).toString('base64')}`;
    expect(calls[0]).toMatchObject({
      method: 'GET',
      url: `https://${host}/${t.account.clientId}/users/${encodeURIComponent(userId)}/notifications/INAPP_WEB?count=2&before=${new Date(now).toISOString()}`,
      headers: { Authorization: basic },
    });

    // Opened: the client sends the current time; archived then un-archived (null).
    const before = Date.now();
    await client.updateInAppNotifications({ ids: ['c2'], opened: true, archived: true });
    await client.updateInAppNotifications({ ids: ['c2'], archived: false });
    const patch = calls.find((c) => c.method === 'PATCH');
    expect(patch).toMatchObject({ url: `https://${host}/${t.account.clientId}/users/${encodeURIComponent(userId)}/notifications/INAPP_WEB` });
    expect(patch!.headers['Content-Type']).toBeUndefined();
    const all = await client.getInAppNotifications({ before: new Date(now).toISOString(), maxCountNeeded: 10 });
    const c2 = all.items.find((n: ClientNotification) => n.id === 'c2') as ClientNotification;
    expect(Date.parse(c2.opened!)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(c2.opened!)).toBeLessThanOrEqual(Date.now());
    expect(c2.archived).toBeUndefined();
    expect(all.items.filter((n: ClientNotification) => n.opened).map((n: ClientNotification) => n.id)).toEqual(['c2']);

    // Its websocket: wss://<websocketHost>?userId=...&envId=<clientId>
    client.openWebSocket();
    expect(PlainWebSocket.opened.at(-1)).toBe(`wss://${host}?userId=${encodeURIComponent(userId)}&envId=${t.account.clientId}`);
    await vi.waitFor(() => expect(t.deps.inappRealtime.connections(t.account.clientId, userId)).toBe(1));
    const fresh = await service.deliver(input(t.account.clientId, userId, { trackingId: 'c4', imageURL: 'https://app.example/a.png' }));
    await vi.waitFor(() => expect(received).toEqual([fresh.notification]));
  });

  it('works in secure mode with hashedUserId, and is refused without it', async () => {
    const env = (await t.app.inject({ method: 'POST', url: '/environments', headers: t.auth, payload: { title: 'Secure' } })).json();
    await t.app.inject({ method: 'PATCH', url: `/environments/${env.clientId}`, headers: t.auth, payload: { secureMode: true } });
    const userId = `grace-${randomUUID()}`;
    await service.store(t.deps.db, input(env.clientId, userId, { trackingId: 's1', date: new Date(Date.now() - 60_000).toISOString() }));

    const received: unknown[] = [];
    const client = NotificationAPIClientSDK.init({
      clientId: env.clientId,
      userId,
      hashedUserId: userHash(env.clientSecret, userId),
      host,
      websocketHost: host,
      onNewInAppNotifications: (notifications: unknown[]) => received.push(...notifications),
    });
    const listed = await client.getInAppNotifications({ before: new Date().toISOString(), maxCountNeeded: 5 });
    expect(listed.items.map((n: ClientNotification) => n.id)).toEqual(['s1']);
    client.openWebSocket();
    await vi.waitFor(() => expect(t.deps.inappRealtime.connections(env.clientId, userId)).toBe(1));
    const fresh = await service.deliver(input(env.clientId, userId, { trackingId: 's2' }));
    await vi.waitFor(() => expect(received).toEqual([fresh.notification]));
    NotificationAPIClientSDK.websocket.disconnect();

    // Without the hash the REST answer is the 401 Error body, which the client hands back as is.
    const unhashed = NotificationAPIClientSDK.init({ clientId: env.clientId, userId, host, websocketHost: host });
    const refused = (await unhashed.rest.getNotifications(new Date().toISOString(), 5)) as unknown as { error: { code: string } };
    expect(refused.error.code).toBe('UNAUTHORIZED');
  });
});

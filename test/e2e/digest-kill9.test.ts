import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { killFixture } from '../helpers/kill-fixture.js';
import { ROOT, freePort, spawnScript, waitForOutput } from '../helpers/process.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/**
 * kill -9 around a digest, with real server processes on a clock that starts where the test
 * says (test/e2e/clock-server.ts): items collected by a first process survive its kill; a second
 * process, started at the digest's due time, claims it and is killed while the digest's email
 * is on the wire (the SMTP sink holds its answer); a third finishes it. The digest is one
 * message: one trackingId for every item, one Message-ID at the sink, every item in it.
 */
describe.each(STORAGE_KINDS)('kill -9 while a digest is being sent (%s)', (kind) => {
  const ITEMS = 5;
  const k = killFixture(kind, 'clarion-digest-kill', 0);
  const secretKey = randomBytes(32).toString('hex');

  /** A server process whose clock starts at `now`; resolves once it listens (with the bootstrap output). */
  const start = async (now: string) => {
    const port = await freePort();
    const server = spawnScript(path.join(ROOT, 'test/e2e/clock-server.ts'), [], {
      CLARION_DATA_DIR: k.dataDir,
      DATABASE_URL: k.databaseUrl,
      SMTP_URL: k.sink.url,
      CLARION_ALLOW_PRIVATE_NETWORKS: 'true',
      CLARION_JOB_LOCK_SECONDS: '2',
      CLARION_SECRET_KEY: secretKey,
      CLARION_TEST_NOW: now,
      PORT: String(port),
    });
    k.servers.push(server);
    const out = await waitForOutput(server, /listening on/, 60_000);
    return { server, out, url: `http://127.0.0.1:${port}` };
  };
  const kill = async (server: ChildProcess) => {
    const exited = new Promise((r) => server.on('exit', r));
    server.kill('SIGKILL');
    await exited;
  };

  // Waits are for events; their sum (three start-ups from source, one lock expiry) is the limit.
  it('collects across a kill, and sends the digest once though its sender is killed mid-send', { timeout: 240_000 }, async () => {
    // Saturday 7 March 2026, 10:00 in New York: the daily 09:00 digest is due Sunday 13:00Z (EDT).
    const first = await start('2026-03-07T15:00:00Z');
    const key = /API key\s+(clarion_sk_\S+)/.exec(first.out)![1];
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const call = async (url: string, method: string, body?: unknown) => {
      const res = await fetch(url, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const log = async (url: string, id: string) => ((await call(`${url}/logs/${id}`, 'GET')).body.logs as Record<string, unknown>[] | undefined)?.[0];

    expect((await call(`${first.url}/types`, 'POST', { notificationId: 'orders', title: 'Orders', channels: ['EMAIL'], options: { EMAIL: { defaultDeliveryOption: 'instant', daily: { enabled: true, hour: '09:00' } } } })).status).toBe(200);
    expect((await call(`${first.url}/user_preferences/ny`, 'POST', [{ notificationId: 'orders', channel: 'EMAIL', delivery: 'daily' }])).status).toBe(200);
    const items: string[] = [];
    for (let i = 1; i <= ITEMS; i++) {
      const res = await call(`${first.url}/send`, 'POST', { type: 'orders', to: { id: 'ny', email: 'ny@example.com', timezone: 'America/New_York' }, parameters: { n: i }, email: { subject: `Order ${i}`, html: '<p>x</p>' } });
      expect(res.status).toBe(200);
      items.push(res.body.trackingId as string);
    }
    for (const id of items) {
      await eventually(async () => (await log(first.url, id))?.email_digest_due_at === '2026-03-08T13:00:00.000Z', 30_000, `item ${id} collected`);
    }
    await kill(first.server);
    expect(k.sink.received).toEqual([]);

    // At the due time: the new process's first digest run claims it and its email goes on the wire.
    const second = await start('2026-03-08T13:00:30Z');
    await eventually(() => k.sink.held() > 0, 60_000, 'the digest email on the wire');
    await kill(second.server);
    expect(k.sink.answered()).toBe(0);
    k.sink.answerAll();

    const third = await start('2026-03-08T13:05:00Z');
    try {
      await eventually(() => k.sink.answered() > 0, 60_000, 'the digest email delivered after the restart');
      const digestIds = new Set<string>();
      for (const id of items) digestIds.add((await log(third.url, id))!.email_digest_tracking_id as string);
      expect(digestIds.size).toBe(1);
      const [digest] = [...digestIds];
      expect(digest).toMatch(/^[0-9a-f-]{36}$/);
      await eventually(async () => (await log(third.url, digest))?.email_sent_at, 30_000, 'the digest logged sent');
      expect(await log(third.url, digest)).toMatchObject({ type: 'orders', user_id: 'ny', email_routing: 'SEND' });
      // One message: every copy at the k.sink (the one in flight at the kill, its retry) carries one Message-ID.
      expect(new Set(k.sink.received.map((m) => m.messageId)).size).toBe(1);
      expect(k.sink.received.length).toBeLessThanOrEqual(2);
      expect(k.sink.received[0].subject).toBe(`${ITEMS} new notifications`);
      for (let i = 1; i <= ITEMS; i++) expect(k.sink.received[0].html).toContain(`<li>Order ${i}</li>`);
    } finally {
      const exited = third.server.exitCode === null && third.server.signalCode === null ? new Promise((r) => third.server.on('exit', r)) : null;
      third.server.kill('SIGTERM');
      await exited;
    }
  });
});

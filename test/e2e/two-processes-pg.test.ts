// Two real `clarion serve` processes on one PostgreSQL database (issue 13): what one process
// stores, the other acts on. A preference set through process A is honoured by a send taken by
// process B, and the throttling and deduplication counts of sends taken by both are one count.
// PostgreSQL tier only: SQLite is one process's embedded file (the global setup prints why the
// tier is skipped when DATABASE_URL is not set).
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, spawnCli, waitForOutput } from '../helpers/process.js';
import { scratchDatabase } from '../helpers/scratch-database.js';
import { eventually } from '../helpers/wait.js';

type Log = Record<string, unknown>;

describe.skipIf(!process.env.DATABASE_URL)('two clarion serve processes on one PostgreSQL database', () => {
  const servers: ChildProcess[] = [];
  const dirs: string[] = [];
  let scratch: Awaited<ReturnType<typeof scratchDatabase>>;
  let a = '';
  let b = '';
  let key = '';

  const call = async (base: string, method: string, url: string, body?: unknown): Promise<{ status: number; json: unknown }> => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, json: await res.json() };
  };
  const ok = async (base: string, method: string, url: string, body?: unknown): Promise<unknown> => {
    const res = await call(base, method, url, body);
    expect(res.status, JSON.stringify(res.json)).toBeLessThan(300);
    return res.json;
  };
  const send = async (base: string, body: Record<string, unknown>): Promise<string> => ((await ok(base, 'POST', '/send', body)) as { trackingId: string }).trackingId;
  /** The logs of these sends once every one is processed and its in-app delivery (when routed) done, read through `base`. */
  const processed = (base: string, trackingIds: string[]) =>
    eventually(async () => {
      const { logs } = (await ok(base, 'GET', `/logs/${trackingIds.join(',')}`)) as { logs: Log[] };
      const done = logs.length === trackingIds.length && logs.every((l) => l.processed_at && (l.inapp_routing !== 'SEND' || l.inapp_delivered_at));
      return done ? logs : undefined;
    }, 30_000, `${trackingIds.length} sends processed`);

  beforeAll(async () => {
    scratch = await scratchDatabase('clarion_two_procs');
    const env = (port: number) => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-two-procs-'));
      dirs.push(dataDir);
      return { CLARION_DATA_DIR: dataDir, DATABASE_URL: scratch.url, PORT: String(port), CLARION_SECRET_KEY: secret };
    };
    // Both decrypt what the other stored (environment secrets): one key, as a deployment shares.
    const secret = randomBytes(32).toString('hex');
    const [portA, portB] = [await freePort(), await freePort()];
    const first = spawnCli(['serve'], env(portA));
    servers.push(first);
    // The first migrates and creates the account; the second starts on the migrated database.
    key = /API key\s+(clarion_sk_\S+)/.exec(await waitForOutput(first, /API key\s+clarion_sk_\S+/, 60_000))![1];
    const second = spawnCli(['serve'], { ...env(portB), LOG_LEVEL: 'info' });
    servers.push(second);
    await waitForOutput(second, /listening on/, 60_000);
    [a, b] = [`http://127.0.0.1:${portA}`, `http://127.0.0.1:${portB}`];
  }, 150_000);
  afterAll(async () => {
    await Promise.all(
      servers.map(async (server) => {
        if (server.exitCode !== null || server.signalCode !== null) return;
        const exited = new Promise((r) => server.on('exit', r));
        server.kill('SIGTERM');
        await exited;
      }),
    );
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    await scratch?.drop();
  });

  it('a preference set through one is honoured by a send through the other; throttling and deduplication count sends of both', { timeout: 120_000 }, async () => {
    await ok(a, 'POST', '/types', { notificationId: 'comments', title: 'Comments', channels: ['EMAIL', 'INAPP_WEB'] });
    await ok(a, 'POST', '/types', { notificationId: 'capped', title: 'Capped', channels: ['INAPP_WEB'], throttling: { max: 2, period: 1, unit: 'days', forever: false, scope: ['userId', 'notificationId'] } });
    await ok(a, 'POST', '/types', { notificationId: 'once', title: 'Once', channels: ['INAPP_WEB'], deduplication: { duration: 86400 } });

    // Through A: ada turns email off. Through B: a send to ada, and the same to cy (no preference).
    await ok(a, 'POST', '/user_preferences/ada', [{ notificationId: 'comments', channel: 'EMAIL', delivery: 'off' }]);
    const content = { email: { subject: 'New comment', html: '<p>Hi</p>' }, inapp: { title: 'New comment' } };
    const toAda = await send(b, { type: 'comments', to: { id: 'ada', email: 'ada@example.com' }, ...content });
    const toCy = await send(b, { type: 'comments', to: { id: 'cy', email: 'cy@example.com' }, ...content });
    const logs = await processed(a, [toAda, toCy]);
    const [ada, cy] = [toAda, toCy].map((id) => logs.find((l) => l.trackingId === id));
    expect(ada).toMatchObject({ email_routing: 'SKIP', email_routing_reason: 'USER_UNSUBSCRIBED', inapp_routing: 'SEND' });
    expect(cy).toMatchObject({ email_routing: 'SEND', inapp_routing: 'SEND' });
    const outbox = async (to: string) => ((await ok(b, 'GET', `/outbox?to=${to}`)) as { messages: unknown[] }).messages;
    await eventually(async () => (await outbox('cy@example.com')).length === 1, 30_000, "cy's email in the outbox");
    expect(await outbox('ada@example.com')).toEqual([]);

    // Six throttled sends (at most 2 a day) and four identical deduplicated ones, alternating A and B.
    const capped = await Promise.all(Array.from({ length: 6 }, (_, i) => send(i % 2 ? b : a, { type: 'capped', to: { id: 'bob' }, inapp: { title: `alert ${i}` } })));
    const once = await Promise.all(Array.from({ length: 4 }, (_, i) => send(i % 2 ? b : a, { type: 'once', to: { id: 'bob' }, inapp: { title: 'Welcome' } })));
    const routing = (logs: Log[]) => logs.map((l) => (l.inapp_routing === 'SEND' ? 'SEND' : String(l.inapp_routing_reason))).sort();
    expect(routing(await processed(b, capped))).toEqual(['SEND', 'SEND', 'THROTTLED', 'THROTTLED', 'THROTTLED', 'THROTTLED']);
    expect(routing(await processed(a, once))).toEqual(['DEDUPLICATED', 'DEDUPLICATED', 'DEDUPLICATED', 'SEND']);
  });
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import pg from 'pg';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, spawnCli, waitForOutput } from '../helpers/process.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/** An SMTP sink that answers slowly, so deliveries are in flight when the worker dies. */
async function slowSink(delayMs: number) {
  const received: { subject: string; messageId: string }[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, _session, callback) {
      simpleParser(stream).then(
        (mail) => {
          received.push({ subject: mail.subject ?? '', messageId: mail.messageId ?? '' });
          setTimeout(() => callback(), delayMs);
        },
        (err) => callback(err),
      );
    },
  });
  // smtp-server reports a connection's socket errors on the server; the killed process resets
  // its connections (ECONNRESET), which is the point of the test. Without a listener the
  // EventEmitter would throw it as an uncaught exception.
  const socketErrors: Error[] = [];
  server.on('error', (err: Error) => socketErrors.push(err));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return { received, socketErrors, url: `smtp://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe.each(STORAGE_KINDS)('kill -9 of the server while deliveries are in flight (%s)', (kind) => {
  const N = 30;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-kill-'));
  let databaseUrl = '';
  let dbName = '';
  let sink: Awaited<ReturnType<typeof slowSink>>;

  beforeAll(async () => {
    sink = await slowSink(150);
    if (kind === 'postgres') {
      dbName = `clarion_kill_${randomBytes(4).toString('hex')}`;
      const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await admin.connect();
      await admin.query(`create database ${dbName}`);
      await admin.end();
      const url = new URL(process.env.DATABASE_URL!);
      url.pathname = `/${dbName}`;
      databaseUrl = url.toString();
    }
  });
  afterAll(async () => {
    await sink.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (dbName) {
      const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await admin.connect();
      await admin.query(`drop database if exists ${dbName} with (force)`);
      await admin.end();
    }
  });

  it('delivers every accepted send after a restart, duplicates carrying the same Message-ID', async () => {
    const env = {
      CLARION_DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      SMTP_URL: sink.url,
      CLARION_ALLOW_PRIVATE_NETWORKS: 'true',
      CLARION_JOB_LOCK_SECONDS: '2',
      CLARION_SECRET_KEY: randomBytes(32).toString('hex'),
    };
    const port1 = await freePort();
    const first = spawnCli(['serve'], { ...env, PORT: String(port1) });
    const out = await waitForOutput(first, /API key\s+clarion_sk_\S+/, 30_000);
    const key = /API key\s+(clarion_sk_\S+)/.exec(out)![1];

    const accepted = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const res = await fetch(`http://127.0.0.1:${port1}/send`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'crash', to: { id: `u${i}`, email: `u${i}@example.com` }, email: { subject: `msg-${i}`, html: '<p>x</p>' } }),
        });
        expect(res.status).toBe(202);
        return (await res.json()).trackingId as string;
      }),
    );
    expect(new Set(accepted).size).toBe(N);

    // Some mail is out, the rest is queued or on the wire: kill without warning.
    await eventually(() => sink.received.length >= 3, 20_000, 'first deliveries');
    first.kill('SIGKILL');
    await new Promise((r) => first.on('exit', r));
    const atKill = sink.received.length;
    expect(atKill).toBeLessThan(N);

    const port2 = await freePort();
    const second = spawnCli(['serve'], { ...env, PORT: String(port2), LOG_LEVEL: 'info' });
    try {
      await waitForOutput(second, /listening on/, 30_000);
      await eventually(() => new Set(sink.received.map((m) => m.subject)).size === N, 60_000, 'every accepted send delivered');
      const bySubject = new Map<string, Set<string>>();
      for (const m of sink.received) bySubject.set(m.subject, (bySubject.get(m.subject) ?? new Set()).add(m.messageId));
      for (const [subject, ids] of bySubject) expect(ids.size, `${subject} kept one Message-ID`).toBe(1);
      // At-least-once: only what was in flight at the kill may arrive twice.
      expect(sink.received.length - N).toBeLessThanOrEqual(16);
      // The sink saw no socket errors but the killed process's dropped connections.
      for (const err of sink.socketErrors) expect((err as NodeJS.ErrnoException).code).toMatch(/^(ECONNRESET|EPIPE)$/);

      const logs = await fetch(`http://127.0.0.1:${port2}/logs/${accepted.slice(0, 25).join(',')}`, { headers: { authorization: `Bearer ${key}` } });
      const body = await logs.json();
      expect(body.logs).toHaveLength(25);
      await eventually(async () => {
        const r = await (await fetch(`http://127.0.0.1:${port2}/logs/${accepted.slice(0, 25).join(',')}`, { headers: { authorization: `Bearer ${key}` } })).json();
        return r.logs.every((l: Record<string, unknown>) => l.email_sent_at);
      }, 20_000, 'logs show every email sent');
    } finally {
      second.kill('SIGTERM');
      await new Promise((r) => second.on('exit', r));
    }
  });
});

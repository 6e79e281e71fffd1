import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchDatabase } from '../helpers/scratch-database.js';
import { freePort, spawnCli, waitForOutput } from '../helpers/process.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * kill -9 of the server while webhook requests are in flight: the receiver answers the first
 * few and holds every later one, the server is killed with those on the wire, and after a
 * restart every event arrives; one that arrives twice carries the same event id.
 */
describe.each(STORAGE_KINDS)('kill -9 while webhooks are in flight (%s)', (kind) => {
  const N = 20;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-whkill-'));
  let databaseUrl = '';
  let scratch: Awaited<ReturnType<typeof scratchDatabase>> | undefined;
  let smtp: SmtpPeer;
  let receiver: WebhookReceiver;
  const servers: ChildProcess[] = [];

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    receiver = await new WebhookReceiver().start();
    if (kind === 'postgres') {
      scratch = await scratchDatabase('clarion_whkill');
      databaseUrl = scratch.url;
    }
  });
  afterAll(async () => {
    for (const server of servers) if (server.exitCode === null && server.signalCode === null) server.kill('SIGKILL');
    await receiver.close();
    await smtp.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await scratch?.drop();
  });

  // Waits are for events; their sum (two start-ups from source, one lease of 5 + 5 s) is the limit.
  it('delivers every event after a restart, a resent one with the same id', { timeout: 240_000 }, async () => {
    const env = {
      CLARION_DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      SMTP_URL: smtp.url,
      CLARION_ALLOW_PRIVATE_NETWORKS: 'true',
      CLARION_JOB_LOCK_SECONDS: '2',
      // Held requests are still waiting for their answer when the kill lands; the lease is 5 s past it.
      CLARION_WEBHOOK_TIMEOUT_SECONDS: '5',
      CLARION_WEBHOOK_POLL_MS: '50',
      CLARION_SECRET_KEY: randomBytes(32).toString('hex'),
    };
    const port1 = await freePort();
    const first = spawnCli(['serve'], { ...env, PORT: String(port1) });
    servers.push(first);
    const out = await waitForOutput(first, /API key\s+clarion_sk_\S+/, 60_000);
    const key = /API key\s+(clarion_sk_\S+)/.exec(out)![1];
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

    const endpoint = await fetch(`http://127.0.0.1:${port1}/webhooks`, { method: 'POST', headers, body: JSON.stringify({ webhook: receiver.url, events: ['EMAIL_DELIVERED'] }) });
    expect(endpoint.status).toBe(200);
    receiver.answer({ status: 200 }, { status: 200 }, { status: 200 }, 'hang');

    const accepted = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const res = await fetch(`http://127.0.0.1:${port1}/send`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ type: 'crash', to: { id: `u${i}`, email: `u${i}@example.com` }, email: { subject: `msg-${i}`, html: '<p>x</p>' } }),
        });
        expect(res.status).toBe(200);
        return (await res.json()).trackingId as string;
      }),
    );

    // Three answered, more on the wire: kill without warning.
    await eventually(() => receiver.requests.length >= 5, 60_000, 'webhooks answered and held');
    const exited = new Promise((r) => first.on('exit', r));
    first.kill('SIGKILL');
    await exited;
    const atKill = receiver.requests.length;
    expect(atKill).toBeLessThan(N);
    receiver.answer({ status: 200 });

    const port2 = await freePort();
    const second = spawnCli(['serve'], { ...env, PORT: String(port2), LOG_LEVEL: 'info' });
    servers.push(second);
    try {
      await waitForOutput(second, /listening on/, 60_000);
      const trackingOf = (body: string) => (JSON.parse(body) as { trackingId: string }).trackingId;
      const delivered = () => new Set(receiver.requests.filter((r) => r.answered === 200).map((r) => trackingOf(r.body)));
      await eventually(() => delivered().size === N, 60_000, 'every event delivered');
      expect(delivered()).toEqual(new Set(accepted));
      // Those held at the kill were sent again.
      const held = receiver.requests.slice(0, atKill).filter((r) => r.answered === null);
      expect(held.length).toBeGreaterThan(0);
      for (const h of held) expect(receiver.requests.slice(atKill).some((r) => r.headers['x-service-id'] === h.headers['x-service-id'] && r.answered === 200)).toBe(true);
      // One event id per message, however often it was sent.
      const ids = new Map<string, Set<string>>();
      for (const r of receiver.requests) ids.set(trackingOf(r.body), (ids.get(trackingOf(r.body)) ?? new Set()).add(String(r.headers['x-service-id'])));
      for (const [trackingId, set] of ids) expect(set.size, trackingId).toBe(1);
    } finally {
      const exited = second.exitCode === null && second.signalCode === null ? new Promise((r) => second.on('exit', r)) : null;
      second.kill('SIGTERM');
      await exited;
    }
  });
});

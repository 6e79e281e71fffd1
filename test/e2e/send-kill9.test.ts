import { describe, expect, it } from 'vitest';
import { expectOneMessageIdPerSubject, killFixture } from '../helpers/kill-fixture.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('kill -9 of the server while deliveries are in flight (%s)', (kind) => {
  const N = 30;
  const k = killFixture(kind, 'clarion-kill', 3);

  // Every wait below is for an event (a line on stdout, the k.sink's count, the logs); the time they
  // take is two server start-ups from source and one lock expiry, which on a loaded 2-core
  // machine runs past vitest's default 30 s, so the limit is the sum of the waits' own bounds.
  it('delivers every accepted send after a restart, duplicates carrying the same Message-ID', { timeout: 240_000 }, async () => {
    const env = k.env();
    const { child: first, port: port1, out } = await k.serve(env, /API key\s+clarion_sk_\S+/);
    const key = /API key\s+(clarion_sk_\S+)/.exec(out)![1];

    const accepted = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const res = await fetch(`http://127.0.0.1:${port1}/send`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'crash', to: { id: `u${i}`, email: `u${i}@example.com` }, email: { subject: `msg-${i}`, html: '<p>x</p>' } }),
        });
        expect(res.status).toBe(200);
        return (await res.json()).trackingId as string;
      }),
    );
    expect(new Set(accepted).size).toBe(N);

    // Some mail is out, some on the wire (held by the k.sink), the rest queued: kill without warning.
    await eventually(() => k.sink.answered() >= 3 && k.sink.held() > 0, 30_000, 'first deliveries, and more in flight');
    await k.kill(first);
    const atKill = k.sink.received.length;
    expect(atKill).toBeLessThan(N);
    expect(k.sink.held()).toBeGreaterThan(0);
    k.sink.answerAll();

    const { child: second, port: port2 } = await k.serve({ ...env, LOG_LEVEL: 'info' }, /listening on/);
    try {
      await eventually(() => new Set(k.sink.received.map((m) => m.subject)).size === N, 60_000, 'every accepted send delivered');
      expectOneMessageIdPerSubject(k.sink.received);
      // At-least-once: only what was in flight at the kill may arrive twice.
      expect(k.sink.received.length - N).toBeLessThanOrEqual(16);
      // The k.sink saw no socket errors but the killed process's dropped connections.
      for (const err of k.sink.socketErrors) expect((err as NodeJS.ErrnoException).code).toMatch(/^(ECONNRESET|EPIPE)$/);

      const logs = await fetch(`http://127.0.0.1:${port2}/logs/${accepted.slice(0, 25).join(',')}`, { headers: { authorization: `Bearer ${key}` } });
      const body = await logs.json();
      expect(body.logs).toHaveLength(25);
      await eventually(async () => {
        const r = await (await fetch(`http://127.0.0.1:${port2}/logs/${accepted.slice(0, 25).join(',')}`, { headers: { authorization: `Bearer ${key}` } })).json();
        return r.logs.every((l: Record<string, unknown>) => l.email_sent_at);
      }, 20_000, 'logs show every email sent');
    } finally {
      const exited = second.exitCode === null && second.signalCode === null ? new Promise((r) => second.on('exit', r)) : null;
      second.kill('SIGTERM');
      await exited;
    }
  });
});

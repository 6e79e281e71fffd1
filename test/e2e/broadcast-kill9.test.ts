// A kill -9 of the server in the middle of a broadcast, then a restart, on both engines: the
// delivery job chain is durable, so the broadcast continues from its send cursor and ends sent;
// every recipient gets the mail, and only what the killed server had already put on the wire
// may arrive twice (at-least-once, docs/broadcasts.md "Delivery"), with the same Message-ID.
import { describe, expect, it } from 'vitest';
import { expectOneMessageIdPerSubject, killFixture } from '../helpers/kill-fixture.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('kill -9 of the server in the middle of a broadcast (%s)', (kind) => {
  // The platform default sender: at most 10 recipients.
  const N = 10;
  const k = killFixture(kind, 'clarion-bcast-kill', 3);

  it('continues after a restart: everyone gets it, duplicates only of what was on the wire at the kill', { timeout: 240_000 }, async () => {
    // One a second: the kill finds recipients not handed over yet.
    const env = k.env({ CLARION_BROADCAST_RATE: '1' });
    const { child: first, port: port1, out } = await k.serve(env, /API key\s+clarion_sk_\S+/);
    const key = /API key\s+(clarion_sk_\S+)/.exec(out)![1];
    const api = async (port: number, method: string, url: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}${url}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> & { counts?: Record<string, number> } };
    };

    const emails = Array.from({ length: N }, (_, i) => `reader-${i}@example.com`);
    const account = (await api(port1, 'GET', '/account')).body as { defaultFromAddress?: string };
    const created = await api(port1, 'POST', '/broadcasts', {
      name: 'Crash test',
      type: 'crash_news',
      audience: { emails },
      fromName: 'News',
      fromAddress: account.defaultFromAddress ?? 'notifications@clarion.localhost',
      subject: 'For {{ user.email }}',
      html: '<p>Hello {{ user.email }}</p>',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id = created.body.broadcastId as string;
    expect((await api(port1, 'POST', `/broadcasts/${id}/send`)).status).toBe(200);

    // Some mail is out, some on the wire (held by the sink), the rest not handed over yet: kill without warning.
    const unhanded = async () => ((await api(port1, 'GET', `/broadcasts/${id}/recipients`)).body.recipients as { trackingId?: string }[]).filter((r) => !r.trackingId).length;
    await eventually(async () => k.sink.answered() >= 3 && k.sink.held() > 0 && (await unhanded()) > 0, 60_000, 'first deliveries, more in flight, the rest not handed over');
    await k.kill(first);
    const onTheWire = new Set(k.sink.received.map((m) => m.subject));
    expect(onTheWire.size).toBeLessThan(N);
    k.sink.answerAll();

    const { child: second, port: port2 } = await k.serve({ ...env, LOG_LEVEL: 'info' }, /listening on/);
    try {
      await eventually(async () => (await api(port2, 'GET', `/broadcasts/${id}`)).body.status === 'sent', 60_000, 'the broadcast sent');
      const subjects = k.sink.received.map((m) => m.subject);
      expect(new Set(subjects)).toEqual(new Set(emails.map((e) => `For ${e}`)));
      // At-least-once: a mail arrives twice only when the killed server had it on the wire, and keeps its Message-ID.
      expectOneMessageIdPerSubject(k.sink.received);
      for (const subject of new Set(subjects)) if (subjects.filter((s) => s === subject).length > 1) expect(onTheWire.has(subject), `${subject} twice`).toBe(true);
      const metrics = await api(port2, 'GET', `/broadcasts/${id}/metrics`);
      expect(metrics.body.counts).toMatchObject({ pending: 0, sent: N, delivered: N, failed: 0, bounced: 0 });
    } finally {
      const exited = second.exitCode === null && second.signalCode === null ? new Promise((r) => second.on('exit', r)) : null;
      second.kill('SIGTERM');
      await exited;
    }
  });
});

// The reputation guard with the workers running, on both engines: a broadcast whose recipients'
// addresses are refused for good by the SMTP peer (one in ten: hard bounces over 5%) pauses with
// REPUTATION_GUARD once 500 attempts are in, before the rest is handed over; a resume overrides
// it and the broadcast ends sent, the guard tripped once. However fast the workers deliver, the
// hand-over stays at most maxInFlight (200 at this rate) ahead of the attempts, so the guard
// judges before everyone is handed over.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callAs, createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { verifySenderDomain } from '../helpers/sender-domains.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

const N = 1000;

describe.each(STORAGE_KINDS)('the reputation guard (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let dns: DnsTestServer;
  const call = (method: 'GET' | 'POST', url: string) => callAs(t, method, url);
  const broadcast = async (id: string) => (await call('GET', `/broadcasts/${id}`)).json<{ status: string; pausedReason?: string }>();
  const metrics = async (id: string) => (await call('GET', `/broadcasts/${id}/metrics`)).json<{ counts: Record<string, number> }>().counts;

  beforeAll(async () => {
    const reject: Record<string, 550> = {};
    for (let i = 0; i < N; i += 10) reject[`u${i}@example.com`] = 550;
    smtp = await startSmtpPeer({ reject });
    dns = await startDnsServer();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true, dnsServer: dns.address, sendingDomain: 'mail.clarion.test', broadcastRate: 100 } });
    await verifySenderDomain(t.app, t.auth, dns, 'bulk.example.test');
    await seedUsers(t, Array.from({ length: N }, (_, i) => userRow(t, `u${String(i).padStart(4, '0')}`, { email: `u${i}@example.com`, properties: '{"plan":"pro"}' })));
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
    await dns?.close();
  });

  it('pauses after 500 attempts with hard bounces over 5%; a resume overrides it', { timeout: 120_000 }, async () => {
    const { broadcastId: id } = await createDraft(t, { fromAddress: 'news@bulk.example.test' });
    expect((await call('POST', `/broadcasts/${id}/send`)).statusCode).toBe(200);
    await eventually(async () => (await broadcast(id)).status === 'paused', 60_000, 'the guard paused it');
    expect(await broadcast(id)).toMatchObject({ status: 'paused', pausedReason: 'REPUTATION_GUARD' });
    const atPause = await metrics(id);
    const attempts = atPause.sent + atPause.failed + atPause.bounced;
    expect(attempts).toBeGreaterThanOrEqual(500);
    expect(atPause.bounced / attempts).toBeGreaterThan(0.05);
    // The rest was not handed over.
    const recipients = (await call('GET', `/broadcasts/${id}/recipients?limit=1000`)).json<{ recipients: { trackingId?: string }[] }>().recipients;
    // At most 499 attempted, 199 in flight and one page (a second of the rate) beyond them.
    expect(recipients.filter((r) => !r.trackingId).length).toBeGreaterThanOrEqual(N - 499 - 199 - 100);

    expect((await call('POST', `/broadcasts/${id}/resume`)).statusCode).toBe(200);
    await eventually(async () => (await broadcast(id)).status === 'sent', 60_000, 'the broadcast sent after the resume');
    expect(await metrics(id)).toMatchObject({ pending: 0, sent: 900, delivered: 900, bounced: 100 });
    const transitions = (await call('GET', `/broadcasts/${id}/transitions`)).json<{ transitions: { operation: string; pausedReason?: string; actor: string }[] }>().transitions;
    expect(transitions.filter((x) => x.operation === 'pause')).toEqual([expect.objectContaining({ pausedReason: 'REPUTATION_GUARD', actor: 'system' })]);
    expect(smtp.messages).toHaveLength(900);
  });
});

// Broadcast delivery driven step by step with a controllable clock, on both engines (no workers:
// the test runs the delivery job's steps itself, at the times they ask for, sometimes late):
// - the account's rate (CLARION_BROADCAST_RATE) holds across two broadcasts sending at once: in
//   every 10-second window at most 5% over, and no burst after a late step;
// - pause stops hand-overs at the next step (what is already handed over is due within a second),
//   resume continues from the cursor with a new chain (the old one stops), cancel skips what was
//   not handed over; nobody is handed over twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChainDriver, NOTHING_DELIVERED, broadcastRow, busiestWindow, firstScope, startChain } from '../helpers/broadcast-chains.js';
import { callAs, createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { verifySenderDomain } from '../helpers/sender-domains.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { broadcastsDb } from '../../src/modules/broadcasts/broadcasts.tables.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';

const RATE = 100;
const FROM = 'news@bulk.example.test';

describe.each(STORAGE_KINDS)('broadcast pacing, pause, resume and cancel (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  const clock = new ManualClock(new Date('2026-05-04T07:00:00.000Z'));
  const scope = () => firstScope(t);
  const call = (method: 'GET' | 'POST', url: string, payload?: unknown) => callAs(t, method, url, payload);
  const db = () => broadcastsDb(t.deps.db);
  const row = (id: string) => broadcastRow(t, id);
  const recipients = (ids: string[]) => db().selectFrom('broadcast_recipients').selectAll().where('broadcast_id', 'in', ids).orderBy('seq').execute();

  const start = (id: string, operation: 'send' | 'resume' = 'send') => startChain(t, id, operation);
  /** Runs the chains' steps at the times they ask for (`late(n)`: how late the n-th run is, ms) until `until` holds or the chains end. */
  const drive = (chains: Map<string, string>, until: () => Promise<boolean>, late?: (n: number) => number) => {
    const driver = new ChainDriver(t, clock);
    for (const [id, token] of chains) driver.add(id, token);
    return driver.run(until, late);
  };
  const handedOver = async (ids: string[]) => (await recipients(ids)).filter((r) => r.tracking_id !== null);
  const messagesOf = async (trackingIds: string[]) =>
    t.deps.db.withTables<SendingTables>().selectFrom('messages').select('tracking_id').where('tracking_id', 'in', trackingIds).execute();

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(kind, { clock, config: { dnsServer: dns.address, sendingDomain: 'mail.clarion.test', broadcastRate: RATE, broadcastMaxInFlight: NOTHING_DELIVERED } });
    await verifySenderDomain(t.app, t.auth, dns, 'bulk.example.test');
    const users = [];
    for (let i = 0; i < 1200; i++) users.push(userRow(t, `u${String(i).padStart(5, '0')}`, { email: `u${i}@example.com`, properties: JSON.stringify({ group: i < 600 ? 'a' : 'b', all: 'yes' }) }));
    await seedUsers(t, users);
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it('two broadcasts of one account share its rate: every 10-second window of due times holds at most 5% over it', async () => {
    const one = await createDraft(t, { fromAddress: FROM, audience: { filter: { 'properties.group': 'a' } } });
    const two = await createDraft(t, { fromAddress: FROM, audience: { filter: { 'properties.group': 'b' } } });
    const ids = [one.broadcastId, two.broadcastId];
    const chains = new Map([[one.broadcastId, await start(one.broadcastId)], [two.broadcastId, await start(two.broadcastId)]]);
    // Every seventh run 700 ms late, every thirteenth 3 s late: a late step must not catch up in a burst.
    const lateness = await drive(chains, async () => (await handedOver(ids)).length === 1200, (n) => (n % 13 === 12 ? 3000 : n % 7 === 6 ? 700 : 0));
    const handed = await handedOver(ids);
    expect(handed).toHaveLength(1200);
    const times = handed.map((r) => Date.parse(r.due_at!)).sort((a, b) => a - b);
    expect(busiestWindow(times)).toBeLessThanOrEqual(RATE * 10 * 1.05);
    // And it does send at the rate, but for the time its steps ran late: 1,200 messages in 12 s and that.
    expect(lateness).toBeGreaterThan(0);
    expect(times[times.length - 1] - times[0]).toBeLessThanOrEqual(12_000 + lateness);
    // One message each, its trackingId the recipient's.
    expect(new Set(handed.map((r) => r.tracking_id)).size).toBe(1200);
    expect(await messagesOf(handed.slice(0, 500).map((r) => r.tracking_id!))).toHaveLength(500);
  });

  it('pause stops hand-overs at the next step, resume continues from the cursor, cancel skips the rest; nobody twice', async () => {
    const { broadcastId: id } = await createDraft(t, { fromAddress: FROM, audience: { filter: { 'properties.all': 'yes' } } });
    const first = await start(id);
    await drive(new Map([[id, first]]), async () => (await handedOver([id])).length >= 250);
    const beforePause = await handedOver([id]);
    expect((await call('POST', `/broadcasts/${id}/pause`)).statusCode).toBe(200);
    const pausedAt = clock.now().getTime();
    // What was handed over before the pause is due within a second of it.
    expect(Math.max(...beforePause.map((r) => Date.parse(r.due_at!)))).toBeLessThanOrEqual(pausedAt + 1000);
    clock.advance(5000);
    expect(await t.services.broadcasts.delivery.step(scope(), id, first)).toBeNull();
    expect(await handedOver([id])).toHaveLength(beforePause.length);

    const second = await start(id, 'resume');
    expect(second).not.toBe(first);
    // The chain of before the pause stops; the new one continues from the cursor.
    expect(await t.services.broadcasts.delivery.step(scope(), id, first)).toBeNull();
    await drive(new Map([[id, second]]), async () => (await handedOver([id])).length >= 600);
    const beforeCancel = await handedOver([id]);
    expect((await call('POST', `/broadcasts/${id}/cancel`)).statusCode).toBe(200);
    expect(await t.services.broadcasts.delivery.step(scope(), id, second)).toBeNull();

    const all = await recipients([id]);
    const handed = all.filter((r) => r.tracking_id !== null);
    expect(handed.map((r) => r.seq)).toEqual(beforeCancel.map((r) => r.seq));
    // In order, each once: seqs 1..n handed over, the rest skipped by the cancel; those handed over stay in flight.
    expect(handed.map((r) => r.seq)).toEqual(handed.map((_, i) => i + 1));
    expect(new Set(handed.map((r) => r.tracking_id)).size).toBe(handed.length);
    expect(all.filter((r) => r.tracking_id === null).every((r) => r.state === 'skipped' && r.skip_reason === 'CANCELED')).toBe(true);
    expect(handed.every((r) => r.state === 'pending')).toBe(true);
    expect(await messagesOf(handed.map((r) => r.tracking_id!).slice(0, 500))).toHaveLength(Math.min(500, handed.length));
  });

  it('pauses with PLAN_EXCEEDED when the account\'s messagesCap is reached mid-send; resume continues from the first refused', async () => {
    const used = Number((await t.deps.db.withTables<SendingTables>().selectFrom('usage_counters').select('messages').where('account_id', '=', t.account.accountId).executeTakeFirst())?.messages ?? 0);
    const setCap = (cap: number) => t.deps.db.updateTable('accounts').set({ messages_cap: cap }).where('id', '=', t.account.accountId).execute();
    await setCap(used + 150);
    const { broadcastId: id } = await createDraft(t, { fromAddress: FROM, audience: { filter: { 'properties.group': 'a' } } });
    await drive(new Map([[id, await start(id)]]), async () => false);
    const paused = (await call('GET', `/broadcasts/${id}`)).json();
    expect(paused).toMatchObject({ status: 'paused', pausedReason: 'PLAN_EXCEEDED' });
    expect(await handedOver([id])).toHaveLength(150);
    expect((await row(id)).send_cursor).toBe(150);

    await setCap(used + 10_000);
    await drive(new Map([[id, await start(id, 'resume')]]), async () => (await handedOver([id])).length === 600);
    const handed = await handedOver([id]);
    expect(handed.map((r) => r.seq)).toEqual(handed.map((_, i) => i + 1));
    expect(new Set(handed.map((r) => r.tracking_id)).size).toBe(600);
  });
});

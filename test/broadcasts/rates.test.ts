// The rate per sender domain (CLARION_BROADCAST_DOMAIN_RATE) beside the account's
// (CLARION_BROADCAST_RATE), and fairness between one account's broadcasts, on both engines, with
// the delivery chains driven step by step on a controllable clock (no workers; some steps late):
// - two broadcasts from one domain whose rate is below the account's: every 10-second window of
//   their due times within 5% of the domain's rate;
// - two broadcasts from two domains: each within its domain's rate (and together faster than one
//   domain could send); three from three domains: the account's rate binds them together;
// - broadcasts sending at once share the slots equally (40-60% each in every window while both
//   are pending), a big one started earlier included.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChainDriver, NOTHING_DELIVERED, busiestWindow, startChain } from '../helpers/broadcast-chains.js';
import { createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { verifySenderDomain } from '../helpers/sender-domains.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { broadcastsDb } from '../../src/modules/broadcasts/broadcasts.tables.js';

const ACCOUNT_RATE = 100;
// Two domains at their full rate are 80 a second together: under the account's 100, and over
// what one broadcast's fair half of the account (50 a second) would be without a domain rate.
const DOMAIN_RATE = 40;
const ONE = 'news@one.example.test';
const TWO = 'news@two.example.test';
const THREE = 'news@three.example.test';
/** How late a step runs: every seventh 700 ms, every thirteenth 3 s (a late step must not catch up in a burst). */
const late = (n: number) => (n % 13 === 12 ? 3000 : n % 7 === 6 ? 700 : 0);

describe.each(STORAGE_KINDS)('broadcast rates per sender domain and fair shares (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  const clock = new ManualClock(new Date('2026-05-04T07:00:00.000Z'));

  /** Due times (ms) of each broadcast's handed-over recipients. */
  async function dueTimes(ids: string[]): Promise<Map<string, number[]>> {
    const rows = await broadcastsDb(t.deps.db).selectFrom('broadcast_recipients').select(['broadcast_id', 'due_at']).where('broadcast_id', 'in', ids).where('due_at', 'is not', null).execute();
    return new Map(ids.map((id) => [id, rows.filter((r) => r.broadcast_id === id).map((r) => Date.parse(r.due_at!)).sort((a, b) => a - b)]));
  }
  const handedOver = async (ids: string[]) => [...(await dueTimes(ids)).values()].reduce((n, times) => n + times.length, 0);

  /** Sends the broadcasts (`group`: their audience) and drives their chains until every recipient is handed over. */
  async function sendAll(drafts: { from: string; group: string }[], lateBy: (n: number) => number): Promise<{ ids: string[]; lateness: number }> {
    const driver = new ChainDriver(t, clock);
    const ids: string[] = [];
    for (const { from, group } of drafts) {
      const { broadcastId } = await createDraft(t, { fromAddress: from, audience: { filter: { 'properties.group': group } } });
      driver.add(broadcastId, await startChain(t, broadcastId));
      ids.push(broadcastId);
    }
    const total = drafts.reduce((n, d) => n + GROUPS[d.group], 0);
    const lateness = await driver.run(async () => (await handedOver(ids)) === total, lateBy);
    expect(await handedOver(ids)).toBe(total);
    return { ids, lateness };
  }

  /**
   * Each broadcast's share of the due times in every 10-second window (and the last, shorter one)
   * of the span where both still had recipients to go: from the later first to the earlier last.
   */
  function expectEqualShares(a: number[], b: number[]): void {
    const from = Math.max(a[0], b[0]);
    const to = Math.min(a[a.length - 1], b[b.length - 1]);
    expect(to - from).toBeGreaterThan(5000);
    for (let start = from; start < to; start += 1000) {
      const end = Math.min(to, start + 10_000);
      const inA = a.filter((x) => x >= start && x < end).length;
      const inB = b.filter((x) => x >= start && x < end).length;
      const share = inA / (inA + inB);
      expect(share, `from ${start - from} ms: ${inA} and ${inB}`).toBeGreaterThanOrEqual(0.4);
      expect(share, `from ${start - from} ms: ${inA} and ${inB}`).toBeLessThanOrEqual(0.6);
      if (end === to) break;
    }
  }

  const GROUPS: Record<string, number> = { a: 600, b: 600, big: 1200 };

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(kind, { clock, config: { dnsServer: dns.address, sendingDomain: 'mail.clarion.test', broadcastRate: ACCOUNT_RATE, broadcastDomainRate: DOMAIN_RATE, broadcastMaxInFlight: NOTHING_DELIVERED } });
    await verifySenderDomain(t.app, t.auth, dns, 'one.example.test');
    await verifySenderDomain(t.app, t.auth, dns, 'two.example.test');
    await verifySenderDomain(t.app, t.auth, dns, 'three.example.test');
    const users = [];
    let n = 0;
    for (const [group, size] of Object.entries(GROUPS)) for (let i = 0; i < size; i++, n++) users.push(userRow(t, `u${String(n).padStart(5, '0')}`, { email: `u${n}@example.com`, properties: JSON.stringify({ group }) }));
    await seedUsers(t, users);
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it('two broadcasts from one domain: every 10-second window of their due times within 5% of the domain\'s rate, shared equally', async () => {
    const { ids, lateness } = await sendAll([{ from: ONE, group: 'a' }, { from: ONE, group: 'b' }], late);
    const times = await dueTimes(ids);
    const all = [...times.values()].flat().sort((x, y) => x - y);
    expect(busiestWindow(all)).toBeLessThanOrEqual(DOMAIN_RATE * 10 * 1.05);
    // At the domain's rate, not slower: 1,200 messages in 30 s, and the time steps ran late.
    expect(lateness).toBeGreaterThan(0);
    expect(all[all.length - 1] - all[0]).toBeLessThanOrEqual(30_000 + lateness);
    expectEqualShares(times.get(ids[0])!, times.get(ids[1])!);
  });

  it('two broadcasts from two domains: each within its domain\'s rate, together twice one domain\'s', async () => {
    // On time (a late step leaves its turn unused, which would hide a domain sending too fast).
    const { ids } = await sendAll([{ from: ONE, group: 'a' }, { from: TWO, group: 'b' }], () => 0);
    const times = await dueTimes(ids);
    for (const id of ids) expect(busiestWindow(times.get(id)!)).toBeLessThanOrEqual(DOMAIN_RATE * 10 * 1.05);
    const all = [...times.values()].flat().sort((x, y) => x - y);
    expect(busiestWindow(all)).toBeLessThanOrEqual(ACCOUNT_RATE * 10 * 1.05);
    // Each at its domain's rate, together twice one domain's: 1,200 messages in 15 s and a second
    // (the second broadcast starts after the first one's first page), where one domain's rate
    // would take 30 s.
    expect(all[all.length - 1] - all[0]).toBeLessThanOrEqual(16_000);
    expectEqualShares(times.get(ids[0])!, times.get(ids[1])!);
  });

  it('three broadcasts from three domains: the account\'s rate binds them together, each below its domain\'s', async () => {
    const { ids } = await sendAll([{ from: ONE, group: 'a' }, { from: TWO, group: 'b' }, { from: THREE, group: 'big' }], () => 0);
    const times = await dueTimes(ids);
    for (const id of ids) expect(busiestWindow(times.get(id)!)).toBeLessThanOrEqual(DOMAIN_RATE * 10 * 1.05);
    // A third of the account each (33 a second, under the domains' 40): 100 a second together, never more.
    const busiest = busiestWindow([...times.values()].flat());
    expect(busiest).toBeLessThanOrEqual(ACCOUNT_RATE * 10 * 1.05);
    expect(busiest).toBeGreaterThanOrEqual(ACCOUNT_RATE * 10 * 0.95);
  });

  it('a broadcast started later is not starved by a big one started earlier: equal shares while both are pending', async () => {
    const driver = new ChainDriver(t, clock);
    const { broadcastId: big } = await createDraft(t, { fromAddress: ONE, audience: { filter: { 'properties.group': 'big' } } });
    driver.add(big, await startChain(t, big));
    // The big one alone for 4 s: all of the domain's rate.
    const startedAt = clock.now().getTime();
    await driver.run(async () => clock.now().getTime() >= startedAt + 4000);
    const alone = (await dueTimes([big])).get(big)!;
    expect(busiestWindow(alone, 4000)).toBeGreaterThanOrEqual(DOMAIN_RATE * 3.5);

    const joinedAt = clock.now().getTime();
    const { broadcastId: later } = await createDraft(t, { fromAddress: ONE, audience: { filter: { 'properties.group': 'a' } } });
    driver.add(later, await startChain(t, later));
    // Its first page comes within 1.5 s of its start: once the big one's page in progress is out
    // (a second of the rate at most) and at most one more of the big one's, already halved.
    await driver.run(async () => (await handedOver([later])) > 0);
    expect((await dueTimes([later])).get(later)![0] - joinedAt).toBeLessThanOrEqual(1500);
    await driver.run(async () => (await handedOver([later])) === GROUPS.a, late);
    const times = await dueTimes([big, later]);
    expect(times.get(big)!.length).toBeLessThan(GROUPS.big);
    expectEqualShares(times.get(big)!, times.get(later)!);
    // The big one finishes alone, at the whole rate again.
    await driver.run(async () => (await handedOver([big])) === GROUPS.big);
    expect(await handedOver([big])).toBe(GROUPS.big);
  });
});

// Backpressure, on both engines, with the delivery chain driven step by step on a controllable
// clock (no workers, so nothing is attempted unless the test says so): a broadcast hands over no
// more while CLARION_BROADCAST_MAX_IN_FLIGHT of its recipients are handed over and not yet
// attempted (by default two seconds of the account's rate, at least 100); once some of them are
// attempted, the hand-over goes on; the waiting chain keeps marking its steps, so the recovery
// sweep does not take it for a dead one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChainDriver, broadcastRow, startChain } from '../helpers/broadcast-chains.js';
import { createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { verifySenderDomain } from '../helpers/sender-domains.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { IN_FLIGHT_WAIT_MS, maxInFlight } from '../../src/modules/broadcasts/broadcast-delivery.js';
import { broadcastsDb } from '../../src/modules/broadcasts/broadcasts.tables.js';

const RATE = 100;
const USERS = 700;

describe.each(STORAGE_KINDS)('broadcast backpressure (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  const clock = new ManualClock(new Date('2026-05-04T07:00:00.000Z'));
  const recipients = (id: string) => broadcastsDb(t.deps.db).selectFrom('broadcast_recipients').selectAll().where('broadcast_id', '=', id).orderBy('seq').execute();
  const handedOver = async (id: string) => (await recipients(id)).filter((r) => r.tracking_id !== null);

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(kind, { clock, config: { dnsServer: dns.address, sendingDomain: 'mail.clarion.test', broadcastRate: RATE } });
    await verifySenderDomain(t.app, t.auth, dns, 'bulk.example.test');
    await seedUsers(t, Array.from({ length: USERS }, (_, i) => userRow(t, `u${String(i).padStart(4, '0')}`, { email: `u${i}@example.com`, properties: '{"plan":"pro"}' })));
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it('defaults to two seconds of the account rate, at least 100; the setting overrides it', () => {
    expect(maxInFlight({ broadcastRate: 100 })).toBe(200);
    expect(maxInFlight({ broadcastRate: 5 })).toBe(100);
    expect(maxInFlight({ broadcastRate: 100, broadcastMaxInFlight: 7 })).toBe(7);
  });

  it('hands over no more while the bound is in flight, and goes on once some are attempted', async () => {
    const cap = maxInFlight(t.deps.config);
    const { broadcastId: id } = await createDraft(t, { fromAddress: 'news@bulk.example.test' });
    const driver = new ChainDriver(t, clock).add(id, await startChain(t, id));
    // Far longer than the hand-over of everyone would take at the rate (7 s).
    const stopAt = clock.now().getTime() + 60_000;
    await driver.run(async () => clock.now().getTime() >= stopAt);
    const held = await handedOver(id);
    // Pages are at most a second of the rate: the last one may take it past the bound by less than one.
    expect(held.length).toBeGreaterThanOrEqual(cap);
    expect(held.length).toBeLessThan(cap + RATE);
    expect(driver.running).toBe(1);
    // Waiting, the chain still marks its steps (the recovery sweep's sign of life).
    expect(Date.parse((await broadcastRow(t, id)).send_step_at!)).toBeGreaterThan(stopAt - 15_000);

    // The first 150 handed over are attempted: the hand-over goes on, up to the bound again.
    await broadcastsDb(t.deps.db).updateTable('broadcast_recipients').set({ state: 'sent' }).where('broadcast_id', '=', id).where('seq', '<=', held[149].seq).execute();
    const againAt = clock.now().getTime() + 10 * IN_FLIGHT_WAIT_MS + 10_000;
    await driver.run(async () => clock.now().getTime() >= againAt);
    const after = await handedOver(id);
    expect(after.length).toBeGreaterThanOrEqual(150 + cap);
    expect(after.length).toBeLessThan(150 + cap + RATE);
  });
});

// The page plan of broadcast delivery (broadcast-pacing.ts): a page's size (a fair share of a
// second of the stricter rate, cut so that no message lags its account slot by more than 0.4 s),
// its slots, and the next turn of its broadcast; and, over many rates, that pages taken as
// delivery takes them keep every 10-second window within 5% of the account's and each domain's rate.
import { describe, expect, it } from 'vitest';
import { MAX_LAG_MS, MAX_PAGE, pageSlots, planPage } from '../../src/modules/broadcasts/broadcast-pacing.js';
import { busiestWindow } from '../helpers/broadcast-chains.js';
import { prng } from '../helpers/broadcasts.js';

describe('broadcast page plan', () => {
  it('holds a fair share of a second of the rate, at most 500', () => {
    expect(planPage({ account: 100, domain: null }, { account: 1, domain: 1 })).toEqual({ size: 100, spacingMs: 10, accountMs: 10 });
    expect(planPage({ account: 100, domain: null }, { account: 2, domain: 2 }).size).toBe(50);
    expect(planPage({ account: 100, domain: null }, { account: 3, domain: 1 }).size).toBe(34);
    expect(planPage({ account: 100_000, domain: null }, { account: 1, domain: 1 }).size).toBe(MAX_PAGE);
    expect(planPage({ account: 1, domain: null }, { account: 4, domain: 4 }).size).toBe(1);
  });

  it('spaces a page by the stricter rate and cuts it so that no message lags its account slot by more than 0.4 s', () => {
    const plan = planPage({ account: 100, domain: 10 }, { account: 1, domain: 1 });
    expect(plan).toEqual({ size: 5, spacingMs: 100, accountMs: 10 });
    expect((plan.size - 1) * (plan.spacingMs - plan.accountMs)).toBeLessThanOrEqual(MAX_LAG_MS);
    // Too slow a domain for any lag: one message a page.
    expect(planPage({ account: 100, domain: 1 }, { account: 1, domain: 1 }).size).toBe(1);
  });

  it('takes the account\'s time and the domain\'s for the page, and comes back once the others sharing them had their turn', () => {
    const plan = planPage({ account: 100, domain: 40 }, { account: 2, domain: 1 });
    expect(plan.size).toBe(20);
    const slots = pageSlots(plan, 20, { account: 2, domain: 1 }, 0);
    expect([slots.dueAt(0).getTime(), slots.dueAt(1).getTime(), slots.dueAt(19).getTime()]).toEqual([0, 25, 475]);
    expect(slots.accountEnd.getTime()).toBe(200);
    expect(slots.domainEnd.getTime()).toBe(500);
    expect(slots.next.getTime()).toBe(500);
    // Two on one domain: each waits for the other's page on the domain too.
    expect(pageSlots(plan, 20, { account: 2, domain: 2 }, 0).next.getTime()).toBe(1000);
  });

  it('keeps every 10-second window within 5% of the account\'s rate and each domain\'s, whatever the rates', () => {
    const random = prng(15);
    for (let trial = 0; trial < 200; trial++) {
      const account = 2 + random.int(400);
      const domainRate = random.next() < 0.3 ? null : 2 + random.int(account);
      const broadcasts = Array.from({ length: 1 + random.int(4) }, (_, i) => ({ domain: random.int(2), left: 200 + random.int(800), next: i * random.int(700), due: [] as number[] }));
      const rates = { account, domain: domainRate !== null && domainRate < account ? domainRate : null };
      const free = { account: 0, domains: [0, 0] };
      for (;;) {
        const sending = broadcasts.filter((b) => b.left > 0);
        if (sending.length === 0) break;
        const b = sending.reduce((x, y) => (y.next < x.next ? y : x));
        const now = b.next + (random.next() < 0.1 ? random.int(3000) : 0);
        const slotsFree = Math.max(free.account, rates.domain === null ? 0 : free.domains[b.domain]);
        if (slotsFree > now) {
          b.next = slotsFree;
          continue;
        }
        const sharers = { account: sending.length, domain: sending.filter((s) => s.domain === b.domain).length };
        const plan = planPage(rates, sharers);
        const count = Math.min(plan.size, b.left);
        const slots = pageSlots(plan, count, sharers, now);
        for (let i = 0; i < count; i++) b.due.push(slots.dueAt(i).getTime());
        b.left -= count;
        free.account = slots.accountEnd.getTime();
        if (rates.domain !== null) free.domains[b.domain] = slots.domainEnd.getTime();
        b.next = slots.next.getTime();
      }
      const all = broadcasts.flatMap((b) => b.due);
      const what = `account ${account}/s, domains ${rates.domain ?? '-'}/s, ${broadcasts.length} broadcasts`;
      expect(busiestWindow(all), what).toBeLessThanOrEqual(Math.max(account * 10 * 1.05, account * 10 + 1));
      if (rates.domain === null) continue;
      for (const domain of [0, 1]) {
        const ofDomain = broadcasts.filter((b) => b.domain === domain).flatMap((b) => b.due);
        expect(busiestWindow(ofDomain), `${what}, domain ${domain}`).toBeLessThanOrEqual(Math.max(rates.domain * 10 * 1.05, rates.domain * 10 + 1));
      }
    }
  });
});

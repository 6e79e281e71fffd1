import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import type { CoreTables } from '../../storage/schema.js';
import type { BroadcastRow } from './broadcasts.tables.js';
import { type PacingKey, PacingRepository } from './pacing.repository.js';

/** Most recipients handed over in one page (one transaction). */
export const MAX_PAGE = 500;
/** The rate of the platform default sender (testing only: "heavily throttled"), messages per second. */
export const DEFAULT_SENDER_RATE = 5;
/**
 * Longest a message may be due after its slot of the account's rate, when its domain's rate is
 * the stricter and spreads the page out: pages are cut so that no message lags more. It is what
 * an account's 10-second window may hold over its rate (under 0.4 s of it: 4%).
 */
export const MAX_LAG_MS = 400;

/** Messages per second: the account's, and the sender domain's when it is the stricter (else null: no domain slots). */
export interface Rates {
  account: number;
  domain: number | null;
}

/** Broadcasts sharing the rates now (each at least 1: the one asking). */
export interface Sharers {
  account: number;
  domain: number;
}

export interface PagePlan {
  /** Most recipients in the page. */
  size: number;
  /** Between two of the page's due times (ms): the stricter of the two rates. */
  spacingMs: number;
  /** Of the account's time each message takes (ms): its rate's spacing. */
  accountMs: number;
}

/**
 * The page one broadcast may hand over now. It holds the broadcast's fair share of a second of the
 * rate (the rate divided by the broadcasts sharing the account), and, when the domain's rate
 * spreads it out, no more than keeps each message within MAX_LAG_MS of its account slot.
 */
export function planPage(rates: Rates, sharers: Sharers): PagePlan {
  const accountMs = 1000 / rates.account;
  const spacingMs = Math.max(accountMs, rates.domain === null ? 0 : 1000 / rates.domain);
  const share = Math.ceil(1000 / spacingMs / Math.max(1, sharers.account));
  const lagLimit = spacingMs > accountMs ? Math.floor((MAX_LAG_MS - accountMs) / (spacingMs - accountMs)) + 1 : MAX_PAGE;
  return { size: Math.max(1, Math.min(MAX_PAGE, share, lagLimit)), spacingMs, accountMs };
}

/** The slots a page of `count` messages takes from `now` (ms), and when its broadcast may take the next. */
export function pageSlots(plan: PagePlan, count: number, sharers: Sharers, now: number): { dueAt: (i: number) => Date; accountEnd: Date; domainEnd: Date; next: Date } {
  const accountTime = count * plan.accountMs;
  const domainTime = count * plan.spacingMs;
  return {
    dueAt: (i) => new Date(now + Math.floor(i * plan.spacingMs)),
    accountEnd: new Date(now + Math.ceil(accountTime)),
    domainEnd: new Date(now + Math.ceil(domainTime)),
    // Its turn comes again once each of the others had one: every broadcast gets an equal share
    // of the account's slots (and of its domain's), whichever step the queue runs first.
    next: new Date(now + Math.ceil(Math.max(accountTime * Math.max(1, sharers.account), domainTime * Math.max(1, sharers.domain)))),
  };
}

/** What a page read of the slots, to take them in its transaction (compare-and-set on the values read). */
export interface Reservation {
  plan: PagePlan;
  sharers: Sharers;
  account: { key: PacingKey; from: string | null };
  domain: { key: PacingKey; from: string | null } | null;
}

/**
 * The rates of an account's broadcasts (docs/broadcasts.md "Rate"): the account's slots, its
 * sender domains' slots when a domain's rate is the stricter, and the share of each broadcast.
 */
export class BroadcastPacing {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'config'>,
    private readonly isDefaultSender: (address: string) => boolean,
  ) {}

  rates(row: Pick<BroadcastRow, 'from_address'>): Rates {
    const account = this.deps.config.broadcastRate;
    const domain = Math.min(this.deps.config.broadcastDomainRate ?? account, this.isDefaultSender(row.from_address) ? DEFAULT_SENDER_RATE : account);
    return { account, domain: domain < account ? domain : null };
  }

  /** The slots of the broadcast's page, or the time they come (the account's or its domain's first free slot is later than `now`). */
  async reserve(row: Pick<BroadcastRow, 'account_id' | 'from_address'>, now: Date): Promise<Reservation | { waitUntil: Date }> {
    const pacing = new PacingRepository(this.deps.db);
    const rates = this.rates(row);
    const domain = domainOf(row.from_address);
    const account = { key: { accountId: row.account_id }, from: await pacing.nextAt({ accountId: row.account_id }) };
    const domainKey = { accountId: row.account_id, domain };
    const domainSlots = rates.domain === null ? null : { key: domainKey, from: await pacing.nextAt(domainKey) };
    const free = Math.max(account.from ? Date.parse(account.from) : 0, domainSlots?.from ? Date.parse(domainSlots.from) : 0);
    if (free > now.getTime()) return { waitUntil: new Date(free) };
    const senders = await pacing.sharing(row.account_id);
    const sharers = { account: Math.max(1, senders.length), domain: Math.max(1, senders.filter((s) => domainOf(s) === domain).length) };
    return { plan: planPage(rates, sharers), sharers, account, domain: domainSlots };
  }

  /** Takes the page's slots in its transaction; false when another page took some since they were read (roll the page back). */
  async take(trx: Kysely<CoreTables>, reservation: Reservation, slots: { accountEnd: Date; domainEnd: Date }): Promise<boolean> {
    const pacing = new PacingRepository(trx);
    // Account first, then domain: every page locks them in this order (no deadlock on PostgreSQL).
    if (!(await pacing.take(reservation.account.key, reservation.account.from, slots.accountEnd.toISOString()))) return false;
    return reservation.domain === null || pacing.take(reservation.domain.key, reservation.domain.from, slots.domainEnd.toISOString());
  }
}

/** The sender domain of an address: the name that keys the account's domain (as DomainsService compares them). */
export function domainOf(address: string): string {
  const lower = address.trim().toLowerCase();
  return lower.slice(lower.lastIndexOf('@') + 1);
}

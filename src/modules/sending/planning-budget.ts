import type { Clock } from '../../clock.js';

/**
 * Planning time (reads and renders, on the deps' clock) one account may take in one routing batch
 * before its other messages in the batch are deferred (DeferJobError: their jobs go to the back
 * of the queue, the run not counted as an attempt). A template can render for up to the render
 * limit (2 s) on a render thread; without a budget a batch of 16 such messages held its routing
 * slot, and every other tenant's message in the batch or behind it in the queue, for 16 renders
 * (measured: another account's one send delivered after 79 s). With it a batch holds its slot
 * for at most about this plus one render per account. Ordinary messages plan in well under a
 * millisecond each: a batch of them never comes near it. See docs/fairness.md.
 */
export const PLANNING_BUDGET_MS = 1_000;

export interface PlanningTiming {
  /** See PLANNING_BUDGET_MS; 0 plans every message of a batch however long it takes. */
  planningBudgetMs: number;
}

/** Why a message was left to a later run of its job. */
export type Deferral = 'budget' | 'slow-account-busy';

/**
 * The accounts of this process found slow to plan (one that took its budget in a batch, until one
 * of its batches plans under it), and how many of their messages are being planned now, across
 * the routing batches running at once. A slow account has one message planned at a time: the
 * other batches leave its messages to a later run at once, without rendering, so the claims pass
 * over its backlog to the jobs of other tenants behind it instead of each holding a routing slot
 * for a render. Accounts that plan within budget are never held back: the common case.
 */
export class SlowAccounts {
  private readonly slow = new Set<string>();
  private readonly planning = new Map<string, number>();

  /** A message of this account waits for a later run: the account is slow and a batch plans one of its messages now. */
  held(accountId: string): boolean {
    return this.slow.has(accountId) && (this.planning.get(accountId) ?? 0) > 0;
  }

  isSlow(accountId: string): boolean {
    return this.slow.has(accountId);
  }

  markSlow(accountId: string): void {
    this.slow.add(accountId);
  }

  markFast(accountId: string): void {
    this.slow.delete(accountId);
  }

  started(accountId: string): void {
    this.planning.set(accountId, (this.planning.get(accountId) ?? 0) + 1);
  }

  ended(accountId: string): void {
    const left = (this.planning.get(accountId) ?? 1) - 1;
    if (left > 0) this.planning.set(accountId, left);
    else this.planning.delete(accountId);
  }
}

/** The planning time each account has taken in one routing batch (one per batch), over the process's SlowAccounts. */
export class PlanningBudget {
  private readonly spentMs = new Map<string, number>();
  private readonly deferred = new Set<string>();

  constructor(
    private readonly clock: Clock,
    private readonly budgetMs: number,
    private readonly slowAccounts: SlowAccounts,
  ) {}

  /** Null when this batch may plan a message of the account now; else why it waits for a later run. */
  deferral(accountId: string): Deferral | null {
    if (this.budgetMs <= 0) return null;
    let why: Deferral | null = null;
    if ((this.spentMs.get(accountId) ?? 0) >= this.budgetMs) why = 'budget';
    else if (this.slowAccounts.held(accountId)) why = 'slow-account-busy';
    if (why) this.deferred.add(accountId);
    return why;
  }

  /** Runs `plan`, counting the time it takes against the account; an account past its budget is slow from then on. */
  async measure<T>(accountId: string, plan: () => Promise<T>): Promise<T> {
    const started = this.clock.now().getTime();
    this.slowAccounts.started(accountId);
    try {
      return await plan();
    } finally {
      this.slowAccounts.ended(accountId);
      const spent = (this.spentMs.get(accountId) ?? 0) + Math.max(0, this.clock.now().getTime() - started);
      this.spentMs.set(accountId, spent);
      if (this.budgetMs > 0 && spent >= this.budgetMs) this.slowAccounts.markSlow(accountId);
    }
  }

  /** At the batch's end: an account that planned all its messages here within budget is not slow (any more). */
  settle(): void {
    for (const [accountId, spent] of this.spentMs) if (spent < this.budgetMs && !this.deferred.has(accountId)) this.slowAccounts.markFast(accountId);
  }
}

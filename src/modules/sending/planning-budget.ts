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

/** The planning time each account has taken in one routing batch (one per batch: no state between batches). */
export class PlanningBudget {
  private readonly spentMs = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly budgetMs: number,
  ) {}

  /** False once the account has taken its budget in this batch: its next messages wait for a later run. */
  allows(accountId: string): boolean {
    return this.budgetMs <= 0 || (this.spentMs.get(accountId) ?? 0) < this.budgetMs;
  }

  /** Runs `plan`, counting the time it takes against the account. */
  async measure<T>(accountId: string, plan: () => Promise<T>): Promise<T> {
    const started = this.clock.now().getTime();
    try {
      return await plan();
    } finally {
      const took = Math.max(0, this.clock.now().getTime() - started);
      this.spentMs.set(accountId, (this.spentMs.get(accountId) ?? 0) + took);
    }
  }
}

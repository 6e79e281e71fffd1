import { expect } from 'vitest';
import { broadcastsDb } from '../../src/modules/broadcasts/broadcasts.tables.js';
import { callAs } from './broadcasts.js';
import type { ManualClock, TestContext } from './context.js';

/**
 * broadcastMaxInFlight for chains driven without workers: nothing is ever attempted, so every
 * handed-over recipient stays in flight, and the backpressure bound would stop the hand-over.
 */
export const NOTHING_DELIVERED = 10_000_000;

/** The first account's environment. */
export const firstScope = (t: Pick<TestContext, 'account'>) => ({ accountId: t.account.accountId, envId: t.account.clientId });

/** The broadcast's row as stored. */
export const broadcastRow = (t: Pick<TestContext, 'deps'>, id: string) => broadcastsDb(t.deps.db).selectFrom('broadcasts').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

/** Sends (or resumes) a broadcast and runs its freeze job to the end, which starts its delivery chain; answers the chain's token. */
export async function startChain(t: TestContext, id: string, operation: 'send' | 'resume' = 'send'): Promise<string> {
  expect((await callAs(t, 'POST', `/broadcasts/${id}/${operation}`)).statusCode).toBe(200);
  while ((await t.services.broadcasts.sending.freeze(firstScope(t), id)) === 'more');
  const token = (await broadcastRow(t, id)).send_token;
  expect(token).not.toBeNull();
  return token!;
}

/**
 * Runs delivery chains as the queue would, without workers: each chain's next step at the time
 * the previous one asked for (the controllable clock moved there), the earliest first; chains
 * may join while others run, keeping their times.
 */
export class ChainDriver {
  private readonly due = new Map<string, { token: string; at: number }>();
  /** Steps run, over every run(). */
  steps = 0;

  constructor(
    private readonly t: TestContext,
    private readonly clock: ManualClock,
  ) {}

  /** A chain whose first step is due now. */
  add(id: string, token: string): this {
    this.due.set(id, { token, at: this.clock.now().getTime() });
    return this;
  }

  /** Chains that have not ended. */
  get running(): number {
    return this.due.size;
  }

  /** Runs steps until `until` holds or every chain ended; `late(n)`: how late the n-th step runs (ms). Answers the lateness added. */
  async run(until: () => Promise<boolean>, late: (n: number) => number = () => 0): Promise<number> {
    let lateness = 0;
    while (this.due.size > 0 && !(await until())) {
      const [id, { token, at }] = [...this.due].sort((a, b) => a[1].at - b[1].at)[0];
      if (at > this.clock.now().getTime()) this.clock.set(new Date(at));
      const delay = late(this.steps++);
      this.clock.advance(delay);
      lateness += delay;
      const next = await this.t.services.broadcasts.delivery.step(firstScope(this.t), id, token);
      if (next) this.due.set(id, { token, at: next.at.getTime() });
      else this.due.delete(id);
    }
    return lateness;
  }
}

/** The most of `times` (ms) in any window of `windowMs`. */
export function busiestWindow(times: number[], windowMs = 10_000): number {
  const sorted = [...times].sort((a, b) => a - b);
  let busiest = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (j < sorted.length && sorted[j] < sorted[i] + windowMs) j++;
    busiest = Math.max(busiest, j - i);
  }
  return busiest;
}

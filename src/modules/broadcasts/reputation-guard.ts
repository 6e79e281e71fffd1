import type { Deps } from '../../deps.js';
import type { EnvScope } from '../../storage/env-settings.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import type { RecipientTracking } from './recipient-tracking.js';
import { RecipientsRepository } from './recipients.repository.js';

/** Attempts (sent, failed or bounced recipients) before the guard judges a broadcast. */
export const GUARD_MIN_ATTEMPTS = 500;
/** Hard bounces of attempts over which the broadcast pauses. */
export const GUARD_BOUNCE_RATE = 0.05;
/** Unsubscribes of delivered over which the broadcast pauses (complaints suppress, and count as failed deliveries later). */
export const GUARD_UNSUBSCRIBE_RATE = 0.02;

/**
 * The reputation guard (docs/broadcasts.md "Reputation guard"): after at least 500 attempts, a
 * hard-bounce rate over 5% or an unsubscribe rate over 2% pauses the broadcast
 * (REPUTATION_GUARD) before its next page. It trips once per broadcast: a caller who resumes it
 * has looked and overrides it.
 */
export class ReputationGuard {
  constructor(
    private readonly deps: Pick<Deps, 'db'>,
    private readonly tracking: Pick<RecipientTracking, 'sync'>,
  ) {}

  /** Why the broadcast must pause now, or null. */
  async check(scope: EnvScope, broadcastId: string): Promise<string | null> {
    // The recipients in flight are the lowest pending seqs: one page brings them up to date.
    await this.tracking.sync(scope, broadcastId, ['pending'], 1);
    const c = await new RecipientsRepository(this.deps.db).counts(scope, broadcastId);
    const attempts = c.sent + c.failed + c.bounced;
    if (attempts < GUARD_MIN_ATTEMPTS) return null;
    const bounceRate = c.bounced / attempts;
    const unsubscribeRate = c.delivered === 0 ? 0 : c.unsubscribed / c.delivered;
    const why =
      bounceRate > GUARD_BOUNCE_RATE
        ? `hard bounces ${c.bounced} of ${attempts} attempts`
        : unsubscribeRate > GUARD_UNSUBSCRIBE_RATE
          ? `unsubscribes ${c.unsubscribed} of ${c.delivered} delivered`
          : null;
    if (!why) return null;
    const tripped = (await new BroadcastsRepository(this.deps.db).transitions(scope, broadcastId)).some((t) => t.operation === 'pause' && t.paused_reason === 'REPUTATION_GUARD');
    return tripped ? null : why;
  }
}

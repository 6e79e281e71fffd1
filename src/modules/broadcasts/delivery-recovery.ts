import type { Deps } from '../../deps.js';
import type { JobDb } from '../../queue/port.js';
import { BroadcastsRepository } from './broadcasts.repository.js';

/** How stale the chain's last step on the broadcast row (send_step_at) may get before a step marks it again. */
export const STEP_MARK_INTERVAL_MS = 10_000;
/**
 * How long a chain may run no step before the sweep replaces it, beyond the job lock (a job whose
 * worker died is taken up again once its lock expires). A live chain steps every second or so and
 * marks it at least every STEP_MARK_INTERVAL_MS.
 */
export const QUIET_CHAIN_MS = 120_000;
/** The longest a chain may stay quiet after repeated restarts (the backoff's cap). */
export const MAX_QUIET_CHAIN_MS = 3_600_000;
/** Broadcasts read per batch of the sweep. */
const SWEEP_BATCH = 100;

/** The enqueue of a new chain's first step (BroadcastJobs.enqueueDeliver; not imported: the delivery imports this file). */
interface ChainStarter {
  enqueueDeliver(db: JobDb, data: { accountId: string; envId: string; broadcastId: string; token: string }): Promise<void>;
}

/**
 * Restarts the delivery of sending broadcasts whose job chain ended (its job failed for good,
 * e.g. the database refused its page on every attempt) or stalled: no step marked on the broadcast
 * row (send_step_at) for longer than the quiet bound. A new chain (a new send token, as a resume
 * starts) continues from the send cursor; the old one, should it ever run again, stops at its
 * next step. The bound doubles with each restart that hands no page over (backoff, up to an
 * hour). The restart is a compare-and-set on the token and the mark it read, so a chain that
 * stepped meanwhile keeps the broadcast: a live chain is never replaced.
 */
export class DeliveryRecovery {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock' | 'ids' | 'logger' | 'config'>,
    private readonly jobs: ChainStarter,
  ) {}

  /** How long a chain started after `restarts` restarts may run no step. */
  quietBound(restarts: number): number {
    const base = QUIET_CHAIN_MS + this.deps.config.jobLockSeconds * 1000 + STEP_MARK_INTERVAL_MS;
    return Math.min(MAX_QUIET_CHAIN_MS, base * 2 ** Math.min(restarts, 20));
  }

  /** Starts a new chain for every quiet one; answers how many. */
  async restartQuiet(): Promise<number> {
    const repo = new BroadcastsRepository(this.deps.db);
    const now = this.deps.clock.now();
    const cutoff = (restarts: number) => new Date(now.getTime() - this.quietBound(restarts)).toISOString();
    let restarted = 0;
    for (let after: string | null = null; ; ) {
      const quiet = await repo.quietChains(cutoff(0), SWEEP_BATCH, after);
      for (const row of quiet) {
        const before = cutoff(row.send_restarts);
        if ((row.send_step_at ?? row.audience_frozen_at!) >= before) continue; // still within its backoff
        const scope = { accountId: row.account_id, envId: row.env_id };
        const token = this.deps.ids.uuid();
        const done = await this.deps.db.transaction().execute(async (trx) => {
          if (!(await new BroadcastsRepository(trx).restartDelivery(scope, row.id, row.send_token, token, before, now.toISOString()))) return false;
          await this.jobs.enqueueDeliver(trx, { accountId: scope.accountId, envId: scope.envId, broadcastId: row.id, token });
          return true;
        });
        if (!done) continue;
        restarted++;
        this.deps.logger.warn(
          { broadcastId: row.id, envId: row.env_id, lastStepAt: row.send_step_at, restarts: row.send_restarts + 1 },
          'broadcast delivery restarted from its send cursor: its chain ran no step for too long',
        );
      }
      if (quiet.length < SWEEP_BATCH) return restarted;
      after = quiet[quiet.length - 1].id;
    }
  }
}

import type { Deps } from '../../deps.js';
import { AppError } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { AudienceService } from './audience.service.js';
import { SYSTEM } from './broadcast-transitions.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import { DEFAULT_SENDER_MAX_RECIPIENTS } from './broadcast-input.js';
import type { BroadcastsService } from './broadcasts.service.js';
import type { BroadcastRow } from './broadcasts.tables.js';
import type { BroadcastJobs } from './broadcasts.jobs.js';
import { RecipientsRepository } from './recipients.repository.js';

/** Pages one run of the freeze job writes before it hands over to its continuation. */
export const FREEZE_PAGES_PER_RUN = 20;
/** Due broadcasts started per read of the start job. */
const START_BATCH = 100;

/**
 * What happens to a broadcast once it is sending, before delivery: the freeze of its audience
 * into recipient rows (pending, or skipped and counted), the checks that pause it at that point
 * (a sender no longer verified, the default sender's 10 recipients), and the transitions that
 * follow from the recipients (sent once none is pending). Scheduled broadcasts are started here
 * too. Once the audience is frozen, delivery of the pending recipients is a job chain of its own
 * (BroadcastDelivery), started here.
 */
export class BroadcastSending {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock' | 'logger' | 'ids'>,
    private readonly broadcasts: BroadcastsService,
    private readonly audience: Pick<AudienceService, 'freezeStep'>,
    private readonly jobs: Pick<BroadcastJobs, 'enqueueFreeze' | 'enqueueDeliver'>,
  ) {}

  /**
   * Freezes up to `maxPages` pages of the broadcast's audience; 'more' when pages remain. Safe to
   * run twice at once and after a crash at any line: every page commits with the cursor move it
   * is guarded by.
   */
  async freeze(scope: EnvScope, id: string, maxPages = FREEZE_PAGES_PER_RUN): Promise<'more' | 'done'> {
    const repo = new BroadcastsRepository(this.deps.db);
    for (let pages = 0; ; ) {
      const row = await repo.find(scope, id);
      if (!row || row.status === 'draft' || row.status === 'scheduled' || row.status === 'sent') return 'done';
      if (row.status === 'canceled') {
        // Pages the freeze wrote after the cancel skipped the pending recipients.
        await new RecipientsRepository(this.deps.db).skipPending(scope, id, 'CANCELED', this.deps.clock.now().toISOString());
        return 'done';
      }
      if (row.audience_frozen_at !== null) {
        await this.settle(scope, row);
        return 'done';
      }
      if (row.freeze_cursor === null && row.status === 'sending' && !(await this.senderAllowed(scope, row))) {
        await this.systemPause(scope, id, 'UNVERIFIED_DOMAIN');
        return 'done';
      }
      if (this.overDefaultSenderLimit(row)) {
        // The rest of the audience is not frozen: the broadcast cannot go out from this sender.
        await repo.finishFreeze(scope, id, this.deps.clock.now().toISOString());
        continue;
      }
      if (pages >= maxPages) return 'more';
      if ((await this.audience.freezeStep(scope, row)) !== 'raced') pages++;
    }
  }

  /** Starts every scheduled broadcast due now; answers how many. */
  async startDue(): Promise<number> {
    const repo = new BroadcastsRepository(this.deps.db);
    let started = 0;
    for (;;) {
      const due = await repo.due(this.deps.clock.now().toISOString(), START_BATCH);
      for (const { id, account_id: accountId, env_id: envId } of due) {
        try {
          await this.broadcasts.transitions.apply({ accountId, envId }, id, 'start', SYSTEM, { within: (trx, row) => this.jobs.enqueueFreeze(trx, row) });
          started++;
        } catch (err) {
          // Canceled or started by another run meanwhile.
          if (!(err instanceof AppError && (err.code === 'CONFLICT' || err.code === 'NOT_FOUND'))) throw err;
        }
      }
      if (due.length < START_BATCH) return started;
    }
  }

  /** A frozen audience: over the default sender's limit it pauses; with recipients pending their delivery starts; with none the broadcast is sent. */
  private async settle(scope: EnvScope, row: BroadcastRow): Promise<void> {
    if (row.status !== 'sending') return;
    if (this.overDefaultSenderLimit(row)) {
      await this.systemPause(scope, row.id, 'AUDIENCE_LIMITS_EXCEEDED');
      return;
    }
    if ((await new RecipientsRepository(this.deps.db).countPending(scope, row.id)) > 0) {
      await this.startDelivery(scope, row);
      return;
    }
    await this.quietly(() => this.broadcasts.transitions.apply(scope, row.id, 'complete', SYSTEM));
  }

  /**
   * Starts a delivery job chain with a new token: the chain of an earlier run (before a pause,
   * or a second freeze run) stops at its next step. Its page cursor stays where it was.
   */
  private async startDelivery(scope: EnvScope, row: BroadcastRow): Promise<void> {
    const token = this.deps.ids.uuid();
    await this.deps.db.transaction().execute(async (trx) => {
      if (await new BroadcastsRepository(trx).claimDelivery(scope, row.id, token, this.deps.clock.now().toISOString())) {
        await this.jobs.enqueueDeliver(trx, { accountId: scope.accountId, envId: scope.envId, broadcastId: row.id, token });
      }
    });
  }

  private overDefaultSenderLimit(row: BroadcastRow): boolean {
    return this.broadcasts.isDefaultSender(row.from_address) && row.frozen_count > DEFAULT_SENDER_MAX_RECIPIENTS;
  }

  private async senderAllowed(scope: EnvScope, row: BroadcastRow): Promise<boolean> {
    try {
      await this.broadcasts.checkSender(scope, row.from_address);
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === 'UNVERIFIED_DOMAIN') return false;
      throw err;
    }
  }

  private systemPause(scope: EnvScope, id: string, reason: 'UNVERIFIED_DOMAIN' | 'AUDIENCE_LIMITS_EXCEEDED'): Promise<void> {
    return this.quietly(() => this.broadcasts.pauseBySystem(scope, id, reason));
  }

  /** A transition the service attempts on its own: one that another operation made moot (a pause, a cancel) is dropped. */
  private async quietly(apply: () => Promise<unknown>): Promise<void> {
    try {
      await apply();
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'CONFLICT')) throw err;
      this.deps.logger.debug({ err }, 'broadcast transition made moot by another operation');
    }
  }
}

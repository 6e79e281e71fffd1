import type { Deps } from '../../deps.js';
import { type JobDb, RetryJobError } from '../../queue/port.js';
import type { BroadcastDelivery } from './broadcast-delivery.js';
import type { BroadcastSending } from './broadcast-sending.js';
import type { DeliveryRecovery } from './delivery-recovery.js';
import type { BroadcastRow } from './broadcasts.tables.js';

export const FREEZE_JOB = 'broadcasts.freeze';
export const START_DUE_JOB = 'broadcasts.start-due';
export const DELIVER_JOB = 'broadcasts.deliver';
export const RECOVER_JOB = 'broadcasts.recover-delivery';

interface FreezeJobData {
  accountId: string;
  envId: string;
  broadcastId: string;
}

interface DeliverJobData extends FreezeJobData {
  /** The chain this run belongs to (broadcasts.send_token): a run of another chain stops. */
  token: string;
  /** The time the step asked for (ISO): a run before it by this server's clock waits (see registerBroadcastJobs). */
  notBefore?: string;
}

/** Runs of one deliver job: its own retries, and its waits when the queue runs it before its time. */
const DELIVER_ATTEMPTS = 50;

/**
 * The jobs of broadcasts, enqueued in the transactions that call for them:
 * - broadcasts.freeze: writes a sending broadcast's audience into recipients, a bounded number of
 *   pages per run, then enqueues its own continuation (BroadcastSending.freeze). Any number may
 *   run for one broadcast: each page is guarded by the freeze cursor it read.
 * - broadcasts.deliver: one step of a sending broadcast's delivery (BroadcastDelivery.step): a
 *   page handed over, or a wait for the account's rate, or a look at the recipients in flight;
 *   then its continuation, at the time the step answers, keyed by the id of the job that ran
 *   (two runs of one job, after a crash, enqueue one continuation).
 * - broadcasts.start-due: starts every scheduled broadcast whose time has come. Each worker
 *   process schedules it every minute (keyed by the minute: once a minute across processes, as
 *   digests.sweep) and scheduling a broadcast enqueues one at its sendAt (keyed by that time), so
 *   a broadcast starts on time, and after a restart at the latest a minute after the workers.
 * - broadcasts.recover-delivery: restarts the delivery chains that ended or stalled
 *   (DeliveryRecovery). Each worker process schedules it every minute, keyed by the minute (once a
 *   minute across processes); not at start, so that the chains of before a restart step first.
 */
export class BroadcastJobs {
  constructor(private readonly deps: Pick<Deps, 'queue' | 'clock' | 'db'>) {}

  async enqueueFreeze(db: JobDb, row: Pick<BroadcastRow, 'id' | 'account_id' | 'env_id'>): Promise<void> {
    const data: FreezeJobData = { accountId: row.account_id, envId: row.env_id, broadcastId: row.id };
    await this.deps.queue.enqueue(db, FREEZE_JOB, data, { maxAttempts: 10 });
  }

  async enqueueDeliver(db: JobDb, data: DeliverJobData, runAt?: Date, key?: string): Promise<void> {
    await this.deps.queue.enqueue(db, DELIVER_JOB, runAt ? { ...data, notBefore: runAt.toISOString() } : data, { maxAttempts: DELIVER_ATTEMPTS, ...(runAt ? { runAt } : {}), ...(key ? { key } : {}) });
  }

  async enqueueStart(db: JobDb, at: Date): Promise<void> {
    await this.deps.queue.enqueue(db, START_DUE_JOB, {}, { key: `at ${at.toISOString()}`, runAt: at, maxAttempts: 3 });
  }

  /** This minute's sweep (one per minute across every process). */
  scheduleSweep(): Promise<string> {
    return this.deps.queue.enqueue(this.deps.db, START_DUE_JOB, {}, { key: this.thisMinute(), maxAttempts: 3 });
  }

  /** This minute's recovery of quiet delivery chains (one per minute across every process). */
  scheduleRecovery(): Promise<string> {
    return this.deps.queue.enqueue(this.deps.db, RECOVER_JOB, {}, { key: this.thisMinute(), maxAttempts: 3 });
  }

  private thisMinute(): string {
    return this.deps.clock.now().toISOString().slice(0, 16);
  }
}

export function registerBroadcastJobs(
  deps: Pick<Deps, 'queue' | 'db' | 'clock' | 'logger'>,
  broadcasts: { sending: BroadcastSending; delivery: Pick<BroadcastDelivery, 'step'>; recovery: Pick<DeliveryRecovery, 'restartQuiet'>; jobs: BroadcastJobs },
): { scheduleSweep: () => Promise<string>; scheduleRecovery: () => Promise<string> } {
  const { sending, delivery, recovery, jobs } = broadcasts;
  deps.queue.work<FreezeJobData>(
    FREEZE_JOB,
    async (data) => {
      const scope = { accountId: data.accountId, envId: data.envId };
      if ((await sending.freeze(scope, data.broadcastId)) === 'more') await jobs.enqueueFreeze(deps.db, { id: data.broadcastId, account_id: data.accountId, env_id: data.envId });
    },
    { concurrency: 2 },
  );
  deps.queue.work<DeliverJobData>(
    DELIVER_JOB,
    async (data, job) => {
      // The queue ran it before its time by this server's clock (PostgreSQL's clock ahead, a test's
      // clock behind): wait the rest as a retry, which the queue times by its own clock, rather
      // than enqueue a continuation that would run at once again.
      const early = data.notBefore ? Date.parse(data.notBefore) - deps.clock.now().getTime() : 0;
      if (early > 0) throw new RetryJobError('not due yet by this server\'s clock', early);
      const next = await delivery.step({ accountId: data.accountId, envId: data.envId }, data.broadcastId, data.token);
      // Keyed by the run's own job: two runs of one job (a crash after this enqueue) make one continuation.
      if (next) await jobs.enqueueDeliver(deps.db, data, next.at, `after ${job.id}`);
    },
    {
      concurrency: 4,
      // The chain ends with it: the recovery sweep starts a new one once the broadcast has been
      // quiet for its bound (DeliveryRecovery), or a pause and a resume do.
      onFailed: (data, _job, error) => {
        const { broadcastId, envId } = data as DeliverJobData;
        deps.logger.error({ broadcastId, envId, error }, 'broadcast delivery stopped: its job failed for good; the recovery sweep restarts it from the send cursor');
        return Promise.resolve();
      },
    },
  );
  deps.queue.work(
    START_DUE_JOB,
    async () => {
      await sending.startDue();
    },
    { concurrency: 1 },
  );
  deps.queue.work(
    RECOVER_JOB,
    async () => {
      await recovery.restartQuiet();
    },
    { concurrency: 1 },
  );
  return { scheduleSweep: () => jobs.scheduleSweep(), scheduleRecovery: () => jobs.scheduleRecovery() };
}

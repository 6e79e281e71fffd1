import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import type { Queue } from '../../queue/port.js';
import type { CoreTables } from '../../storage/schema.js';
import { ensureType } from '../types/types.service.js';
import { UsersService } from '../users/users.service.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import { Batcher, type Settled as SettledOf } from '../../storage/batcher.js';
import type { IntakeOutcome, IntakeUnit, SendIntake } from './intake.contract.js';
import { MessagesRepository } from './messages.repository.js';
import { UsageRepository } from './usage.repository.js';

class Rejected extends Error {
  constructor(readonly outcome: IntakeOutcome) {
    super(outcome);
  }
}

/**
 * The batch cannot commit as a whole: an account's usage did not fit its cap, or one send failed
 * (a refused merge, a database error). The batch is rolled back and redone send by send.
 */
class RedoAlone extends Error {}

type Settled = SettledOf<IntakeOutcome>;

const MAX_BATCH = 32;

/**
 * The intake through the repositories (PostgreSQL), as group commits: the sends that arrive
 * while a batch commits form the next batch, in one transaction; a send that fails makes the
 * batch redo each send alone, so it fails alone (writeBatch). Measured reasons for the rest
 * (issue 3 note):
 * - several lanes run batches at once on pooled connections: each statement is a round trip,
 *   and one lane left the server mostly idle;
 * - usage is counted once per account at the end of the batch, so the counter row (which every
 *   send of an account updates) is locked for one statement and the commit, not the whole
 *   batch: lanes otherwise queued behind each other on it. A batch that does not fit the cap
 *   (rare: only at the cap) is rolled back and redone send by send.
 */
export class KyselyIntake implements SendIntake {
  private readonly lanes: Batcher<IntakeUnit, IntakeOutcome>[];
  private readonly users: UsersService;

  constructor(
    private readonly deps: Deps,
    private readonly queue: Queue,
    lanes = 4,
  ) {
    this.users = new UsersService(deps);
    this.lanes = Array.from({ length: lanes }, () => new Batcher((units) => this.commit(units), MAX_BATCH));
  }

  write(unit: IntakeUnit): Promise<IntakeOutcome> {
    const lane = this.lanes.reduce((least, lane) => (lane.load < least.load ? lane : least));
    return lane.submit(unit);
  }

  private async commit(units: IntakeUnit[]): Promise<Settled[]> {
    try {
      return await this.writeBatch(units);
    } catch (error) {
      if (!(error instanceof RedoAlone)) throw error;
      const settled: Settled[] = [];
      for (const unit of units) settled.push(await this.writeAlone(unit).then((value): Settled => ({ ok: true, value }), (err: unknown): Settled => ({ ok: false, error: err })));
      return settled;
    }
  }

  /**
   * One batch in one transaction, without a savepoint per send: they were two of the five or so
   * round trips a send costs. A send refused by its Idempotency-Key has written nothing when it
   * is refused; any other failure rejects with RedoAlone, so the batch is rolled back and each
   * send is written in a transaction of its own, where it fails alone (rare: a refused merge).
   */
  private async writeBatch(units: IntakeUnit[]): Promise<Settled[]> {
    return this.deps.db.transaction().execute(async (trx) => {
      const settled: Settled[] = [];
      const usage = new Map<string, { unit: IntakeUnit; count: number }>();
      for (const unit of units) {
        try {
          await this.writeIn(trx, unit);
        } catch (error) {
          if (error instanceof Rejected) {
            settled.push({ ok: true, value: error.outcome });
            continue;
          }
          throw new RedoAlone();
        }
        settled.push({ ok: true, value: 'ok' });
        const key = `${unit.accountId}\u0000${unit.usage.cycleStart}`;
        const entry = usage.get(key);
        if (entry) entry.count++;
        else usage.set(key, { unit, count: 1 });
      }
      const counter = new UsageRepository(trx);
      for (const { unit, count } of usage.values()) {
        if (!(await counter.tryCount(unit.accountId, unit.usage.cycleStart, unit.usage.cap, count))) throw new RedoAlone();
      }
      return settled;
    });
  }

  /** One send in its own transaction, counted on its own (the slow path after BatchOverCap). */
  private async writeAlone(unit: IntakeUnit): Promise<IntakeOutcome> {
    try {
      await this.deps.db.transaction().execute(async (trx) => {
        await this.writeIn(trx, unit);
        if (!(await new UsageRepository(trx).tryCount(unit.accountId, unit.usage.cycleStart, unit.usage.cap))) throw new Rejected('cap');
      });
      return 'ok';
    } catch (err) {
      if (err instanceof Rejected) return err.outcome;
      throw err;
    }
  }

  /** Writes one send; when the Idempotency-Key is taken it rejects before writing anything. */
  private async writeIn(trx: Kysely<any>, unit: IntakeUnit): Promise<void> {
    if (unit.idempotency && !(await new IdempotencyRepository(trx).insert(unit.idempotency))) throw new Rejected('replay');
    const user = await this.users.upsertRecipient(unit.accountId, unit.envId, unit.recipient, trx as Kysely<CoreTables>);
    if (unit.ensureType) await ensureType(this.deps, unit.accountId, unit.envId, unit.ensureType, trx);
    // Job first, so the message is written once, with its job id; both commit together.
    const job = unit.job;
    const jobId = await this.queue.enqueue(trx, job.name, job.data, job.runAt ? { runAt: job.runAt } : {});
    await new MessagesRepository(trx).insertMessage({ ...unit.message, user_email: user.email ?? null, user_number: user.number ?? null, job_id: jobId });
  }
}

import { type Kysely, sql } from 'kysely';
import type { Deps } from '../../deps.js';
import type { Queue } from '../../queue/port.js';
import type { CoreTables } from '../../storage/schema.js';
import { ensureType } from '../types/types.service.js';
import { UsersService } from '../users/users.service.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import type { IntakeOutcome, IntakeUnit, SendIntake } from './intake.js';
import { MessagesRepository } from './messages.repository.js';
import { UsageRepository } from './usage.repository.js';

class Rejected extends Error {
  constructor(readonly outcome: IntakeOutcome) {
    super(outcome);
  }
}

/** The batch's usage did not fit an account's cap: the batch is redone send by send. */
class BatchOverCap extends Error {}

interface Pending {
  unit: IntakeUnit;
  resolve: (outcome: IntakeOutcome) => void;
  reject: (err: unknown) => void;
}

type Settled = { ok: true; outcome: IntakeOutcome } | { ok: false; error: unknown };

const MAX_BATCH = 32;

/**
 * The intake through the repositories (PostgreSQL), as group commits: the sends that arrive
 * while a batch commits form the next batch, one transaction with a savepoint per send, so one
 * rejected send rolls back alone. Measured reasons for the rest (issue 3 note):
 * - several lanes run batches at once on pooled connections: each statement is a round trip,
 *   and one lane left the server mostly idle;
 * - usage is counted once per account at the end of the batch, so the counter row (which every
 *   send of an account updates) is locked for one statement and the commit, not the whole
 *   batch: lanes otherwise queued behind each other on it. A batch that does not fit the cap
 *   (rare: only at the cap) is rolled back and redone send by send.
 */
export class KyselyIntake implements SendIntake {
  private readonly lanes: Lane[];
  private readonly users: UsersService;

  constructor(
    private readonly deps: Deps,
    private readonly queue: Queue,
    lanes = 4,
  ) {
    this.users = new UsersService(deps);
    this.lanes = Array.from({ length: lanes }, () => new Lane(this));
  }

  write(unit: IntakeUnit): Promise<IntakeOutcome> {
    const lane = this.lanes.reduce((least, lane) => (lane.load < least.load ? lane : least));
    return lane.write(unit);
  }

  /** One batch in one transaction; rejects with BatchOverCap when an account's usage does not fit. */
  async writeBatch(units: IntakeUnit[]): Promise<Settled[]> {
    return this.deps.db.transaction().execute(async (trx) => {
      const settled: Settled[] = [];
      const usage = new Map<string, { unit: IntakeUnit; count: number }>();
      for (const unit of units) {
        await sql`savepoint intake_unit`.execute(trx);
        try {
          await this.writeIn(trx, unit);
          await sql`release savepoint intake_unit`.execute(trx);
          settled.push({ ok: true, outcome: 'ok' });
          const key = `${unit.accountId}\u0000${unit.usage.cycleStart}`;
          const entry = usage.get(key);
          if (entry) entry.count++;
          else usage.set(key, { unit, count: 1 });
        } catch (error) {
          await sql`rollback to savepoint intake_unit`.execute(trx);
          await sql`release savepoint intake_unit`.execute(trx);
          settled.push(error instanceof Rejected ? { ok: true, outcome: error.outcome } : { ok: false, error });
        }
      }
      const counter = new UsageRepository(trx);
      for (const { unit, count } of usage.values()) {
        if (!(await counter.tryCount(unit.accountId, unit.usage.cycleStart, unit.usage.cap, count))) throw new BatchOverCap();
      }
      return settled;
    });
  }

  /** One send in its own transaction, counted on its own (the slow path after BatchOverCap). */
  async writeAlone(unit: IntakeUnit): Promise<IntakeOutcome> {
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

/** One group commit: a batch at a time, the next one gathering meanwhile. */
class Lane {
  private pending: Pending[] = [];
  private inFlight = 0;
  private draining = false;

  constructor(private readonly intake: KyselyIntake) {}

  /** Sends waiting or in the batch being committed. */
  get load(): number {
    return this.pending.length + this.inFlight;
  }

  write(unit: IntakeUnit): Promise<IntakeOutcome> {
    return new Promise((resolve, reject) => {
      this.pending.push({ unit, resolve, reject });
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.pending.length > 0) {
        await new Promise((resolve) => setImmediate(resolve));
        const batch = this.pending.splice(0, MAX_BATCH);
        this.inFlight = batch.length;
        let settled: Settled[];
        try {
          settled = await this.intake.writeBatch(batch.map((p) => p.unit));
        } catch (error) {
          if (error instanceof BatchOverCap) {
            for (const item of batch) await this.intake.writeAlone(item.unit).then(item.resolve, item.reject);
          } else {
            // The commit itself failed: nothing of the batch is durable.
            for (const item of batch) item.reject(error);
          }
          continue;
        }
        batch.forEach((item, i) => {
          const result = settled[i];
          if (result.ok) item.resolve(result.outcome);
          else item.reject(result.error);
        });
      }
    } finally {
      this.inFlight = 0;
      this.draining = false;
    }
  }
}

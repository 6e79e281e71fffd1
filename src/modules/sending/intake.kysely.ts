import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import type { Queue } from '../../queue/port.js';
import { GroupCommit } from '../../storage/group-commit.js';
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

/**
 * The intake through the repositories (PostgreSQL): units are group-committed, each in its own
 * savepoint, so one rejected unit rolls back alone.
 */
export class KyselyIntake implements SendIntake {
  private readonly commits: GroupCommit;
  private readonly users: UsersService;

  constructor(
    private readonly deps: Deps,
    private readonly queue: Queue,
  ) {
    this.commits = new GroupCommit(deps.db);
    this.users = new UsersService(deps);
  }

  async write(unit: IntakeUnit): Promise<IntakeOutcome> {
    try {
      await this.commits.run((trx) => this.writeIn(trx, unit));
      return 'ok';
    } catch (err) {
      if (err instanceof Rejected) return err.outcome;
      throw err;
    }
  }

  private async writeIn(trx: Kysely<any>, unit: IntakeUnit): Promise<void> {
    if (unit.idempotency && !(await new IdempotencyRepository(trx).insert(unit.idempotency))) throw new Rejected('replay');
    if (!(await new UsageRepository(trx).tryCount(unit.accountId, unit.usage.cycleStart, unit.usage.cap))) throw new Rejected('cap');
    const user = await this.users.upsertRecipient(unit.accountId, unit.envId, unit.recipient, trx as Kysely<CoreTables>);
    if (unit.ensureType) await ensureType(this.deps, unit.accountId, unit.envId, unit.ensureType, trx);
    // Job first, so the message is written once, with its job id; both commit together.
    const job = unit.job;
    const jobId = await this.queue.enqueue(trx, job.name, job.data, job.runAt ? { runAt: job.runAt } : {});
    await new MessagesRepository(trx).insertMessage({ ...unit.message, user_email: user.email ?? null, user_number: user.number ?? null, job_id: jobId });
  }
}

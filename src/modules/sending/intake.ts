import type { Kysely } from 'kysely';
import type { Deps } from '../../deps.js';
import type { Queue } from '../../queue/port.js';
import type { Settled } from '../../storage/batcher.js';
import type { CoreTables } from '../../storage/schema.js';
import { TypesRepository } from '../types/types.repository.js';
import { autoCreatedTypeRow } from '../types/types.service.js';
import { type UserRow, UsersRepository } from '../users/users.repository.js';
import { type Recipient, planRecipientUpsert } from '../users/users.service.js';
import { type IdempotencyRow, IdempotencyRepository } from './idempotency.repository.js';
import { type AcceptedSend, MessagesRepository } from './messages.repository.js';
import type { MessageRow } from './sending.tables.js';
import { UsageRepository } from './usage.repository.js';

/**
 * Everything one accepted send writes, computed and validated before any statement runs. The
 * intake writes it in one transaction with the other units of its batch, so the answer 202 is
 * given only once the message and its job are durable together.
 */
export interface IntakeUnit {
  accountId: string;
  envId: string;
  now: string;
  /** Present when the request carried an Idempotency-Key. */
  idempotency: IdempotencyRow | null;
  usage: { cycleStart: string; cap: number };
  recipient: Recipient;
  /** The notification type to create when missing; null when it is known to exist. */
  ensureType: string | null;
  /** The job that processes the message; runAt null: at once. */
  job: AcceptedSend['job'];
  /** The message row; the intake fills job_id, and user_email/user_number from the stored user. */
  message: MessageRow;
}

/** ok: committed. replay: the Idempotency-Key is held by an earlier send. cap: over messagesCap. */
export type IntakeResult = 'ok' | 'replay' | 'cap';
/** A unit's result, or the error that failed it alone (a refused merge, a database error). */
export type IntakeOutcome = Settled<IntakeResult>;

/** The batch cannot commit as a whole; it is rolled back and redone unit by unit. */
class RedoAlone extends Error {}
/** Retries of a unit alone that keeps meeting concurrent batches. */
const REDO_ATTEMPTS = 3;

const userKey = (accountId: string, envId: string, userId: string) => `${accountId}\u0000${envId}\u0000${userId}`;
const cycleKey = (accountId: string, cycleStart: string) => `${accountId}\u0000${cycleStart}`;

/** One recipient of a batch: as stored when the batch read it, and as the accepted units leave it. */
interface BatchUser {
  stored: UserRow | undefined;
  latest: UserRow | undefined;
}

/**
 * The one write path of accepted sends (POST /send, the older sender route, scheduled sends,
 * broadcast fan-out): a batch of units in one transaction, with a constant number of
 * statements per batch rather than per send (claim the Idempotency-Keys, read and write the
 * recipients, create missing types, count usage, write messages and jobs), each unit still
 * succeeding or failing alone. Engine-agnostic: what is faster on one engine (SQLite's journal
 * of immediate sends) is inside the repositories.
 *
 * A unit refused by a rule (its key is held, the cap is reached, its recipient cannot be
 * merged) is settled without writing; a batch that cannot commit as a whole (a database error,
 * a user created or a counter moved by a concurrent batch on PostgreSQL) is rolled back and
 * redone unit by unit, where such a failure fails that unit only.
 */
export class SendIntake {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'storage' | 'secrets'>,
    private readonly queue: Pick<Queue, 'enqueue'>,
  ) {}

  /** Writes the units; resolves, per unit in order, its result or the error that failed it alone. */
  async accept(units: IntakeUnit[]): Promise<IntakeOutcome[]> {
    if (units.length === 0) return [];
    try {
      return await this.deps.db.transaction().execute((trx) => this.writeBatch(trx, units));
    } catch (error) {
      if (units.length === 1) return [await this.retryAlone(units[0], error)];
      const outcomes: IntakeOutcome[] = [];
      for (const unit of units) outcomes.push(...(await this.accept([unit])));
      return outcomes;
    }
  }

  /** A unit alone that met a concurrent batch (RedoAlone) reads again and retries, a few times. */
  private async retryAlone(unit: IntakeUnit, error: unknown): Promise<IntakeOutcome> {
    for (let attempt = 0; error instanceof RedoAlone && attempt < REDO_ATTEMPTS; attempt++) {
      try {
        return (await this.deps.db.transaction().execute((trx) => this.writeBatch(trx, [unit])))[0];
      } catch (err) {
        error = err;
      }
    }
    return { ok: false, error: error instanceof RedoAlone ? new Error('the send met concurrent writes too often to commit') : error };
  }

  private async writeBatch(trx: Kysely<CoreTables>, units: IntakeUnit[]): Promise<IntakeOutcome[]> {
    const usageRepo = new UsageRepository(trx);
    const cycles = distinct(units.map((u) => ({ accountId: u.accountId, cycleStart: u.usage.cycleStart })), (c) => cycleKey(c.accountId, c.cycleStart));
    // First, a write: on SQLite it takes the write lock, so nothing read below goes stale.
    await usageRepo.ensureCounters(cycles);

    const outcomes: (IntakeOutcome | undefined)[] = units.map(() => undefined);
    const idempotency = new IdempotencyRepository(trx);
    const keyed = units.filter((u) => u.idempotency !== null).map((u) => u.idempotency!);
    const claimed = await idempotency.claimMany(keyed);
    units.forEach((unit, i) => {
      if (unit.idempotency && !claimed.has(unit.idempotency.tracking_id)) outcomes[i] = { ok: true, value: 'replay' };
    });

    const users = await this.readUsers(trx, units.filter((_, i) => outcomes[i] === undefined));
    const used = await usageRepo.usedMany(cycles);
    const counted = new Map<string, number>();
    const accepted: AcceptedSend[] = [];
    const released: IdempotencyRow[] = [];
    const types = new Map<string, ReturnType<typeof autoCreatedTypeRow>>();
    units.forEach((unit, i) => {
      if (outcomes[i] !== undefined) return;
      const { accountId, envId } = unit;
      const user = users.get(userKey(accountId, envId, unit.recipient.userId))!;
      let row: UserRow;
      try {
        row = planRecipientUpsert(user.latest, accountId, envId, unit.recipient.userId, unit.recipient.patch, unit.now, this.deps.secrets).row;
      } catch (error) {
        outcomes[i] = { ok: false, error };
        if (unit.idempotency) released.push(unit.idempotency);
        return;
      }
      const cycle = cycleKey(accountId, unit.usage.cycleStart);
      const count = counted.get(cycle) ?? 0;
      if ((used.get(cycle) ?? 0) + count >= unit.usage.cap) {
        outcomes[i] = { ok: true, value: 'cap' };
        if (unit.idempotency) released.push(unit.idempotency);
        return;
      }
      counted.set(cycle, count + 1);
      user.latest = row;
      if (unit.ensureType) types.set(`${envId}\u0000${unit.ensureType}`, autoCreatedTypeRow(accountId, envId, unit.ensureType, unit.now));
      accepted.push({ message: { ...unit.message, user_email: row.email, user_number: row.number }, job: unit.job });
      outcomes[i] = { ok: true, value: 'ok' };
    });

    await idempotency.releaseMany(released);
    await this.writeUsers(trx, users);
    await new TypesRepository(trx).insertManyIfMissing([...types.values()]);
    await new MessagesRepository(trx).insertAccepted(accepted, this.queue);
    // Counted once per account at the end, so the counter row is locked for one statement and
    // the commit (PostgreSQL). Another batch may have counted since the read: then redo alone.
    for (const cycle of cycles) {
      const count = counted.get(cycleKey(cycle.accountId, cycle.cycleStart)) ?? 0;
      const cap = units.find((u) => u.accountId === cycle.accountId && u.usage.cycleStart === cycle.cycleStart)!.usage.cap;
      if (count > 0 && !(await usageRepo.tryCount(cycle.accountId, cycle.cycleStart, cap, count))) throw new RedoAlone();
    }
    return outcomes as IntakeOutcome[];
  }

  /**
   * The batch's recipients, one query per environment. On PostgreSQL those the batch will change
   * are read again and locked (in id order), so a concurrent batch's change to them is not lost.
   */
  private async readUsers(trx: Kysely<CoreTables>, units: IntakeUnit[]): Promise<Map<string, BatchUser>> {
    const lockRows = this.deps.storage.dialect === 'postgres';
    const repo = new UsersRepository(trx, lockRows);
    const users = new Map<string, BatchUser>();
    for (const group of groupBy(units, (u) => `${u.accountId}\u0000${u.envId}`).values()) {
      const { accountId, envId } = group[0];
      const ids = [...new Set(group.map((u) => u.recipient.userId))];
      for (const id of ids) users.set(userKey(accountId, envId, id), { stored: undefined, latest: undefined });
      for (const row of await repo.findMany(accountId, envId, ids)) users.set(userKey(accountId, envId, row.id), { stored: row, latest: row });
      if (!lockRows) continue;
      const changing = group.filter((u) => {
        const stored = users.get(userKey(accountId, envId, u.recipient.userId))!.stored;
        if (!stored) return false;
        try {
          return planRecipientUpsert(stored, accountId, envId, u.recipient.userId, u.recipient.patch, u.now, this.deps.secrets).write !== null;
        } catch {
          return false;
        }
      });
      const locked = [...new Set(changing.map((u) => u.recipient.userId))];
      for (const row of await repo.findMany(accountId, envId, locked, true)) users.set(userKey(accountId, envId, row.id), { stored: row, latest: row });
    }
    return users;
  }

  /** New recipients in one INSERT, changed ones one UPDATE each (a repeated send changes nothing). */
  private async writeUsers(trx: Kysely<CoreTables>, users: Map<string, BatchUser>): Promise<void> {
    const repo = new UsersRepository(trx);
    const inserts: UserRow[] = [];
    for (const { stored, latest } of users.values()) {
      if (!latest || latest === stored) continue;
      if (!stored) inserts.push(latest);
      else await repo.update(latest.account_id, latest.env_id, latest.id, latest);
    }
    // A user created by a concurrent batch since the read (PostgreSQL): merge into it alone.
    if ((await repo.insertManyIfAbsent(inserts)).size !== inserts.length) throw new RedoAlone();
  }
}

function distinct<T>(items: T[], key: (item: T) => string): T[] {
  const seen = new Map<string, T>();
  for (const item of items) if (!seen.has(key(item))) seen.set(key(item), item);
  return [...seen.values()];
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

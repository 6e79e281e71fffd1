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
import { UsageRepository, isUsageCapRefusal } from './usage.repository.js';

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
/** The batch was counted from this process's last count, which another process moved: redo it from a read. */
class StaleCount extends Error {}
/** Cycles whose last count this process keeps (accounts times cycles; forgotten all at once past it). */
const MAX_COUNTS_KEPT = 10_000;
/** Retries of a unit alone that keeps meeting concurrent batches. */
const REDO_ATTEMPTS = 3;

const OK: IntakeOutcome = { ok: true, value: 'ok' };
const REPLAY: IntakeOutcome = { ok: true, value: 'replay' };
const CAP: IntakeOutcome = { ok: true, value: 'cap' };

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
 * Measured (issue 11, 50 concurrent callers, no HTTP, CPU per send): the SQLite intake before
 * this one cost about 10 µs per send; this one through Kysely alone about 20 (building and
 * compiling each statement, and garbage); with the hot statements of its repositories prepared
 * on SQLite (usage, recipients, journal, jobs) about 10 again.
 *
 * A unit refused by a rule (its key is held, the cap is reached, its recipient cannot be
 * merged) is settled without writing; a batch that cannot commit as a whole (a database error,
 * a user created or a counter moved by a concurrent batch on PostgreSQL) is rolled back and
 * redone unit by unit, where such a failure fails that unit only.
 */
export class SendIntake {
  /**
   * Each cycle's count as this process's last batch left it, keyed `accountId NUL cycleStart`:
   * a batch that fits in what it leaves under the cap skips reading the counter (see writeBatch).
   */
  private readonly lastCounts = new Map<string, number>();

  constructor(
    private readonly deps: Pick<Deps, 'db' | 'storage' | 'secrets'>,
    private readonly queue: Pick<Queue, 'enqueueMany'>,
  ) {}

  /** Writes the units; resolves, per unit in order, its result or the error that failed it alone. */
  async accept(units: IntakeUnit[]): Promise<IntakeOutcome[]> {
    if (units.length === 0) return [];
    try {
      return await this.write(units);
    } catch (error) {
      if (units.length === 1) return [await this.retryAlone(units[0], error)];
      const outcomes: IntakeOutcome[] = [];
      for (const unit of units) outcomes.push(...(await this.accept([unit])));
      return outcomes;
    }
  }

  /**
   * Writes units inside the caller's transaction, as one batch with no redo: an error (a refused
   * recipient, a counter moved by a concurrent batch) fails the caller's transaction, which its
   * caller retries. For writes that must commit with the send (a digest's claim and its message).
   */
  acceptWithin(trx: Kysely<CoreTables>, units: IntakeUnit[]): Promise<IntakeOutcome[]> {
    return this.writeBatch(trx, units, tallyOf(units), false, false);
  }

  /** A unit alone that met a concurrent batch (RedoAlone) reads again and retries, a few times. */
  private async retryAlone(unit: IntakeUnit, error: unknown): Promise<IntakeOutcome> {
    for (let attempt = 0; error instanceof RedoAlone && attempt < REDO_ATTEMPTS; attempt++) {
      try {
        return (await this.write([unit]))[0];
      } catch (err) {
        error = err;
      }
    }
    return { ok: false, error: error instanceof RedoAlone ? new Error('the send met concurrent writes too often to commit') : error };
  }

  /** One transaction; a batch counted from a stale count (StaleCount) is written again from a read. */
  private async write(units: IntakeUnit[]): Promise<IntakeOutcome[]> {
    try {
      return await this.writeAlone(units, true);
    } catch (error) {
      if (!(error instanceof StaleCount)) throw error;
      return this.writeAlone(units, false);
    }
  }

  /**
   * The batch in a transaction of its own. On PostgreSQL it is counted with its COMMIT
   * (countOrAbort, one round trip fewer): a count refused fails the commit, and is then what a
   * refused tryCount is in writeBatch. Which of the batch's counters refused is not known here:
   * a batch with any count taken from this process's last one is redone from a read first.
   */
  private async writeAlone(units: IntakeUnit[], fromLastCounts: boolean): Promise<IntakeOutcome[]> {
    const tallies = tallyOf(units);
    const countWithCommit = this.deps.storage.dialect === 'postgres';
    try {
      return await this.transaction((trx) => this.writeBatch(trx, units, tallies, fromLastCounts, countWithCommit));
    } catch (error) {
      if (!countWithCommit || !isUsageCapRefusal(error)) throw error;
      for (const tally of tallies) this.lastCounts.delete(countKey(tally));
      throw tallies.some((t) => t.fromLastCount) ? new StaleCount() : new RedoAlone();
    }
  }

  private transaction<T>(fn: (trx: Kysely<CoreTables>) => Promise<T>): Promise<T> {
    return this.deps.db.transaction().execute(fn);
  }

  /** `countWithCommit`: count without waiting, failing the transaction when refused (writeAlone). */
  private async writeBatch(trx: Kysely<CoreTables>, units: IntakeUnit[], tallies: Tally[], fromLastCounts: boolean, countWithCommit: boolean): Promise<IntakeOutcome[]> {
    const sqlite = this.deps.storage.sqlite;
    const usage = new UsageRepository(trx, sqlite);
    // On SQLite, first a write: it takes the write lock, so nothing read below goes stale.
    // PostgreSQL locks rows, not the database: a counter is created when first counted (tryCount).
    if (this.deps.storage.dialect === 'sqlite') await usage.ensureCounters(tallies);

    const outcomes = new Array<IntakeOutcome | undefined>(units.length);
    const idempotency = new IdempotencyRepository(trx);
    const keyed = units.filter((u) => u.idempotency !== null).map((u) => u.idempotency!);
    const claimed = keyed.length > 0 ? await idempotency.claimMany(keyed) : new Set<string>();
    units.forEach((unit, i) => {
      if (unit.idempotency && !claimed.has(unit.idempotency.tracking_id)) outcomes[i] = REPLAY;
    });

    const users = await this.readUsers(trx, keyed.length > 0 ? units.filter((_, i) => outcomes[i] === undefined) : units);
    await this.readCounts(usage, tallies, fromLastCounts);
    const accepted: AcceptedSend[] = [];
    const released: IdempotencyRow[] = [];
    const types = new Map<string, ReturnType<typeof autoCreatedTypeRow>>();
    units.forEach((unit, i) => {
      if (outcomes[i] !== undefined) return;
      const { accountId, envId } = unit;
      const user = users.find((g) => g.accountId === accountId && g.envId === envId)!.byId.get(unit.recipient.userId)!;
      let row: UserRow;
      try {
        row = planRecipientUpsert(user.latest, accountId, envId, unit.recipient.userId, unit.recipient.patch, unit.now, this.deps.secrets).row;
      } catch (error) {
        outcomes[i] = { ok: false, error };
        if (unit.idempotency) released.push(unit.idempotency);
        return;
      }
      const tally = tallies.find((t) => t.accountId === accountId && t.cycleStart === unit.usage.cycleStart)!;
      if (tally.used + tally.counted >= unit.usage.cap) {
        outcomes[i] = CAP;
        if (unit.idempotency) released.push(unit.idempotency);
        return;
      }
      tally.counted++;
      user.latest = row;
      if (unit.ensureType) types.set(`${envId}\u0000${unit.ensureType}`, autoCreatedTypeRow(accountId, envId, unit.ensureType, unit.now));
      // The message is the unit's to fill (IntakeUnit.message).
      unit.message.user_email = row.email;
      unit.message.user_number = row.number;
      accepted.push(unit);
      outcomes[i] = OK;
    });

    if (released.length > 0) shareRefusals(units, outcomes, claimed);
    await idempotency.releaseMany(released);
    await this.writeUsers(trx, users);
    await new TypesRepository(trx).insertManyIfMissing([...types.values()]);
    await new MessagesRepository(trx, sqlite).insertAccepted(accepted, this.queue);
    // Counted once per account at the end, so the counter row is locked for one statement and
    // the commit (PostgreSQL). Another batch may have counted since the read: then redo alone;
    // since the count this process last saw (another process counted): redo from a read.
    for (const tally of tallies) {
      if (tally.counted === 0) continue;
      const key = countKey(tally);
      let count: number | null;
      if (countWithCommit) {
        await usage.countOrAbort(tally.accountId, tally.cycleStart, tally.cap, tally.counted);
        // What this batch saw plus what it counted: at most the count the commit leaves (other
        // processes may have counted too). Too low a count kept only lets a later batch skip the
        // read and be redone from one if its count is refused (readCounts).
        count = tally.used + tally.counted;
      } else count = await usage.tryCount(tally.accountId, tally.cycleStart, tally.cap, tally.counted);
      if (count === null) {
        this.lastCounts.delete(key);
        throw tally.fromLastCount ? new StaleCount() : new RedoAlone();
      }
      if (this.lastCounts.size >= MAX_COUNTS_KEPT) this.lastCounts.clear();
      this.lastCounts.set(key, count);
    }
    return outcomes as IntakeOutcome[];
  }

  /**
   * Each cycle's messages counted so far. A batch whose sends all fit under the cap by the
   * count this process's last batch left takes that count instead of reading the counter (a
   * round trip per batch on PostgreSQL): the guarded count at the end refuses it if another
   * process counted since, and the batch is redone from a read (StaleCount). Whether a send is
   * over the cap is only ever decided from a read. A count kept from a batch that then rolled
   * back is too high: it can only make a batch read.
   */
  private async readCounts(usage: UsageRepository, tallies: Tally[], fromLastCounts: boolean): Promise<void> {
    const unread: Tally[] = [];
    for (const tally of tallies) {
      const last = fromLastCounts ? this.lastCounts.get(countKey(tally)) : undefined;
      if (last !== undefined && last + tally.units <= tally.minCap) {
        tally.used = last;
        tally.fromLastCount = true;
      } else unread.push(tally);
    }
    if (unread.length === 0) return;
    const used = await usage.usedMany(unread);
    for (const tally of unread) tally.used = used.get(countKey(tally)) ?? 0;
  }

  /**
   * The batch's recipients, one query per environment. On PostgreSQL those the batch will change
   * are read again and locked (in id order), so a concurrent batch's change to them is not lost.
   */
  private async readUsers(trx: Kysely<CoreTables>, units: IntakeUnit[]): Promise<EnvUsers[]> {
    const lockRows = this.deps.storage.dialect === 'postgres';
    const repo = new UsersRepository(trx, lockRows, this.deps.storage.sqlite);
    const groups: EnvUsers[] = [];
    for (const unit of units) {
      let group = groups.find((g) => g.accountId === unit.accountId && g.envId === unit.envId);
      if (!group) {
        group = { accountId: unit.accountId, envId: unit.envId, byId: new Map(), units: [] };
        groups.push(group);
      }
      group.units.push(unit);
      if (!group.byId.has(unit.recipient.userId)) group.byId.set(unit.recipient.userId, { stored: undefined, latest: undefined });
    }
    for (const { accountId, envId, byId, units: own } of groups) {
      for (const row of await repo.findMany(accountId, envId, [...byId.keys()])) byId.set(row.id, { stored: row, latest: row });
      if (!lockRows) continue;
      const changing = new Set<string>();
      for (const u of own) {
        const stored = byId.get(u.recipient.userId)!.stored;
        if (!stored || changing.has(stored.id)) continue;
        try {
          if (planRecipientUpsert(stored, accountId, envId, u.recipient.userId, u.recipient.patch, u.now, this.deps.secrets).write !== null) changing.add(stored.id);
        } catch {
          // Refused: settled when the batch plans it, writes nothing.
        }
      }
      for (const row of await repo.findMany(accountId, envId, [...changing], true)) byId.set(row.id, { stored: row, latest: row });
    }
    return groups;
  }

  /** New recipients in one INSERT, changed ones one UPDATE each (a repeated send changes nothing). */
  private async writeUsers(trx: Kysely<CoreTables>, groups: EnvUsers[]): Promise<void> {
    const repo = new UsersRepository(trx);
    const inserts: UserRow[] = [];
    for (const { byId } of groups) {
      for (const { stored, latest } of byId.values()) {
        if (!latest || latest === stored) continue;
        if (!stored) inserts.push(latest);
        else await repo.update(latest.account_id, latest.env_id, latest.id, latest);
      }
    }
    // A user created by a concurrent batch since the read (PostgreSQL): merge into it alone.
    if (inserts.length > 0 && (await repo.insertManyIfAbsent(inserts)).size !== inserts.length) throw new RedoAlone();
  }
}

/** A batch's recipients in one environment. */
interface EnvUsers {
  accountId: string;
  envId: string;
  byId: Map<string, BatchUser>;
  units: IntakeUnit[];
}

/** An account's billing cycle in a batch: used when the batch read it, and counted by the batch since. */
interface Tally {
  accountId: string;
  cycleStart: string;
  cap: number;
  /** The batch's sends in this cycle, and the lowest cap among them. */
  units: number;
  minCap: number;
  used: number;
  /** Whether `used` is the count this process last saw rather than a read. */
  fromLastCount: boolean;
  counted: number;
}

/** A cycle's key in lastCounts and in UsageRepository.usedMany's answer. */
function countKey(tally: Pick<Tally, 'accountId' | 'cycleStart'>): string {
  return `${tally.accountId}\u0000${tally.cycleStart}`;
}

/** The batch's cycles; a batch holds few accounts, so a scan is cheaper than a key per send. */
function tallyOf(units: IntakeUnit[]): Tally[] {
  const tallies: Tally[] = [];
  for (const { accountId, usage } of units) {
    const tally = tallies.find((t) => t.accountId === accountId && t.cycleStart === usage.cycleStart);
    if (tally) {
      tally.units++;
      tally.minCap = Math.min(tally.minCap, usage.cap);
    } else tallies.push({ accountId, cycleStart: usage.cycleStart, cap: usage.cap, units: 1, minCap: usage.cap, used: 0, fromLastCount: false, counted: 0 });
  }
  return tallies;
}

/**
 * A send refused in this batch (400, 402) lets its Idempotency-Key go: a refusal is not
 * remembered. Units of the same batch that waited on that key with the same body get the same
 * refusal, as a replay of it would have been; left waiting, they would find no answer to replay
 * and answer 409 (20 concurrent identical sends: 2 refusals, 18 conflicts).
 */
function shareRefusals(units: IntakeUnit[], outcomes: (IntakeOutcome | undefined)[], claimed: Set<string>): void {
  units.forEach((unit, i) => {
    const key = unit.idempotency;
    if (outcomes[i] !== REPLAY || !key) return;
    const holder = units.findIndex((other) => other.idempotency !== null && claimed.has(other.idempotency.tracking_id) && other.idempotency.env_id === key.env_id && other.idempotency.key === key.key);
    if (holder >= 0 && outcomes[holder] !== OK && units[holder].idempotency!.request_hash === key.request_hash) outcomes[i] = outcomes[holder];
  });
}

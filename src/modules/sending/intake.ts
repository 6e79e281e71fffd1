import type { Deps } from '../../deps.js';
import type { Queue } from '../../queue/port.js';
import { SqliteQueue } from '../../queue/sqlite-queue.js';
import type { SendIntake } from './intake.contract.js';
import { KyselyIntake } from './intake.kysely.js';
import { SqliteIntake } from './intake.sqlite.js';

export { INGEST_CHUNK, INGEST_SENDS_JOB, type IntakeOutcome, type IntakeUnit, type SendIntake } from './intake.contract.js';

/** The SQLite intake when the queue is the embedded one on the same connection, else the repositories'. */
export function createIntake(deps: Deps, queue: Queue): SendIntake {
  if (deps.storage.sqlite && queue instanceof SqliteQueue) return new SqliteIntake(deps.db, deps.storage.sqlite, queue, deps.secrets);
  return new KyselyIntake(deps, queue);
}

import type { IdempotencyRow } from './idempotency.repository.js';
import type { MessageRow } from './sending.tables.js';
import type { Recipient } from '../users/users.service.js';

/** Moves a `send_intake` chunk of journaled sends into messages and processes them (SQLite). */
export const INGEST_SENDS_JOB = 'sends.ingest';
/** Sends per `send_intake` chunk, and so per ingest job. */
export const INGEST_CHUNK = 16;

/**
 * Everything one accepted send writes, computed and validated before any statement runs. The
 * intake writes it in one transaction (with other sends' units, in a group commit), so the
 * answer 202 is given only once the message and its job are durable together.
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
  /** The processing job. On SQLite a send without runAt is journaled instead (see SqliteIntake). */
  job: { name: string; data: unknown; runAt: Date | null };
  /** The message row; the intake fills job_id, and user_email/user_number from the stored user. */
  message: MessageRow;
}

/** ok: committed. replay: the Idempotency-Key is held by an earlier send. cap: over messagesCap. */
export type IntakeOutcome = 'ok' | 'replay' | 'cap';

/** The write side of POST /send. Each unit succeeds or fails alone; a thrown error fails that unit only. */
export interface SendIntake {
  write(unit: IntakeUnit): Promise<IntakeOutcome>;
}

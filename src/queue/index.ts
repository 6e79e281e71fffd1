import type { Storage } from '../storage/db.js';
import { PgBossQueue, type PgBossQueueOptions } from './pgboss-queue.js';
import type { Queue } from './port.js';
import { SqliteQueue, type SqliteQueueOptions } from './sqlite-queue.js';

export * from './port.js';
export { backoffDelay, type QueueLogger, type BackoffOptions, type GraceTimer } from './runner.js';
export { SqliteQueue, type SqliteQueueOptions, type CommonQueueOptions } from './sqlite-queue.js';
export { PgBossQueue, type PgBossQueueOptions } from './pgboss-queue.js';

/** Options of both engines; each ignores the other's. */
export type QueueOptions = SqliteQueueOptions & PgBossQueueOptions;

/**
 * The job queue of this storage: the embedded queue in the same SQLite database, or pg-boss on
 * the same PostgreSQL. Either way enqueue() joins the caller's transaction.
 */
export function createQueue(storage: Pick<Storage, 'db' | 'dialect'> & Partial<Pick<Storage, 'sqlite'>>, options: QueueOptions = {}): Queue {
  return storage.dialect === 'postgres' ? new PgBossQueue(storage.db, options) : new SqliteQueue(storage.db, { sqlite: storage.sqlite, ...options });
}

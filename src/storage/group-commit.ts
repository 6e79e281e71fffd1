import { type Kysely, sql } from 'kysely';

interface Pending {
  work: (trx: Kysely<any>) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit: units of work that arrive while a transaction is committing are run together
 * in the next transaction, each inside its own savepoint so one failing unit rolls back alone.
 * Every unit's promise settles only after its transaction committed, so an answer given on it
 * is durable. On SQLite, where every write transaction is serialized and a commit costs far
 * more than a short statement, this turns N commits into one under load, and adds no wait when
 * idle (a lone unit starts at once).
 */
export class GroupCommit {
  private queue: Pending[] = [];
  private running = false;

  constructor(
    private readonly db: Kysely<any>,
    private readonly maxBatch = 32,
  ) {}

  run<T>(work: (trx: Kysely<any>) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (v: unknown) => void, reject });
      if (!this.running) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        // better-sqlite3 runs synchronously: a batch is one long task for the event loop. Keep
        // batches small and let pending I/O (new requests) in between them.
        await new Promise((resolve) => setImmediate(resolve));
        const batch = this.queue.splice(0, this.maxBatch);
        const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
        try {
          await this.db.transaction().execute(async (trx) => {
            for (const item of batch) {
              await sql`savepoint group_unit`.execute(trx);
              try {
                const value = await item.work(trx);
                await sql`release savepoint group_unit`.execute(trx);
                outcomes.push({ ok: true, value });
              } catch (error) {
                await sql`rollback to savepoint group_unit`.execute(trx);
                await sql`release savepoint group_unit`.execute(trx);
                outcomes.push({ ok: false, error });
              }
            }
          });
        } catch (error) {
          // The commit itself failed: nothing of the batch is durable.
          for (const item of batch) item.reject(error);
          continue;
        }
        batch.forEach((item, i) => {
          const outcome = outcomes[i];
          if (outcome.ok) item.resolve(outcome.value);
          else item.reject(outcome.error);
        });
      }
    } finally {
      this.running = false;
    }
  }
}

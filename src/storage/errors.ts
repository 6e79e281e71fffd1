/** Unique violation on either engine (pg 23505, SQLite SQLITE_CONSTRAINT_PRIMARYKEY / _UNIQUE). */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

const DEADLOCK_RETRIES = 3;

/** Runs a statement (or transaction) again when PostgreSQL chose it as a deadlock victim (40P01): everything it did was rolled back. */
export async function retryDeadlock<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || attempt > DEADLOCK_RETRIES) throw err;
    }
  }
}

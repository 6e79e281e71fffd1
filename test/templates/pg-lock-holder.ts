import pg from 'pg';
import type { TestStorage } from '../helpers/storage.js';

/**
 * A PostgreSQL session of its own in a test database's schema that holds locks in an open
 * transaction, the barrier of a deterministic race: the server's transactions queue behind it
 * (or behind each other) at the statement a test wants them stopped at, `waitForBlocked(n)`
 * returns once n of them wait there, and `release()` lets them go in that state. No timing is
 * involved: the wait is for PostgreSQL to report the sessions as blocked.
 */
export class LockHolder {
  private constructor(
    private readonly client: pg.Client,
    private readonly pid: number,
  ) {}

  /** Opens the session and its transaction; `statements` take the locks (and may change rows, seen by no one until commit). */
  static async hold(storage: TestStorage, ...statements: { text: string; values?: unknown[] }[]): Promise<LockHolder> {
    if (!storage.pgSchema) throw new Error('LockHolder needs a PostgreSQL test storage');
    const client = new pg.Client({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${storage.pgSchema}` });
    await client.connect();
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    await client.query('begin');
    for (const s of statements) await client.query(s.text, s.values);
    return new LockHolder(client, rows[0].pid);
  }

  /**
   * Resolves once `count` other sessions wait on this one's locks, directly or behind another
   * waiter (a second writer of the row queues behind the first). Fails after `limitMs` with what
   * was seen, so a request that never reaches the barrier fails the test instead of hanging it.
   */
  async waitForBlocked(count: number, limitMs = 20_000): Promise<void> {
    const deadline = Date.now() + limitMs;
    let behind = 0;
    while (Date.now() < deadline) {
      behind = await this.blockedBehind();
      if (behind >= count) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`expected ${count} sessions blocked behind the lock holder, saw ${behind}`);
  }

  /** Ends the transaction: `commit` to make its changes (a deletion, say) visible, else rolled back. */
  async release(how: 'commit' | 'rollback' = 'rollback'): Promise<void> {
    await this.client.query(how);
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }

  private async blockedBehind(): Promise<number> {
    const { rows } = await this.client.query<{ pid: number; blockers: number[] }>(
      `select pid, pg_blocking_pids(pid) as blockers from pg_stat_activity where wait_event_type = 'Lock'`,
    );
    const behind = new Set<number>([this.pid]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const row of rows) {
        if (!behind.has(row.pid) && row.blockers.some((b) => behind.has(b))) {
          behind.add(row.pid);
          grew = true;
        }
      }
    }
    return behind.size - 1;
  }
}

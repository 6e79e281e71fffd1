// The send intake's count on PostgreSQL (UsageRepository.countOrAbort, migration 0094): sent
// without waiting for its answer, it counts when the messages fit and otherwise fails the
// transaction at its COMMIT, keeping nothing of it.
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UsageRepository, isUsageCapRefusal } from '../../src/modules/sending/usage.repository.js';
import type { CoreTables } from '../../src/storage/schema.js';
import { STORAGE_KINDS, type TestStorage, createTestStorage } from '../helpers/storage.js';

// The PostgreSQL tier (the global setup prints why it is skipped when DATABASE_URL is not set).
describe.skipIf(!STORAGE_KINDS.includes('postgres'))('usage count with the commit (postgres)', () => {
  let t: TestStorage;
  let db: Kysely<CoreTables>;
  const cycle = '2026-11-01';
  const used = async (account: string) =>
    (await sql<{ messages: number }>`SELECT messages FROM usage_counters WHERE account_id = ${account} AND cycle_start = ${cycle}`.execute(db)).rows[0]?.messages;
  /** Counts in a transaction of its own that also writes a marker row; resolves the commit's error, if any. */
  const countInTransaction = (account: string, cap: number, count: number) =>
    db
      .transaction()
      .execute(async (trx) => {
        await sql`INSERT INTO count_markers (account_id) VALUES (${account})`.execute(trx);
        await new UsageRepository(trx).countOrAbort(account, cycle, cap, count);
      })
      .then(
        () => null,
        (error: unknown) => error,
      );

  beforeAll(async () => {
    t = await createTestStorage('postgres');
    db = t.db;
    await sql`CREATE TABLE count_markers (account_id text NOT NULL)`.execute(db);
  });
  afterAll(async () => {
    await t?.destroy();
  });

  it('creates the cycle counter on its first count and counts while the messages fit, up to the cap exactly', async () => {
    expect(await countInTransaction('acc-fit', 5, 3)).toBeNull();
    expect(await used('acc-fit')).toBe(3);
    expect(await countInTransaction('acc-fit', 5, 2)).toBeNull();
    expect(await used('acc-fit')).toBe(5);
  });

  it('fails the commit when the messages do not fit: nothing counted, nothing of the transaction kept', async () => {
    expect(await countInTransaction('acc-full', 4, 3)).toBeNull();
    const error = await countInTransaction('acc-full', 4, 2);
    expect(isUsageCapRefusal(error)).toBe(true);
    expect(await used('acc-full')).toBe(3);
    const markers = await sql<{ n: number }>`SELECT count(*)::int AS n FROM count_markers WHERE account_id = 'acc-full'`.execute(db);
    expect(markers.rows[0].n).toBe(1);
    // A first count larger than the cap creates no count either.
    expect(isUsageCapRefusal(await countInTransaction('acc-new', 2, 3))).toBe(true);
    expect(await used('acc-new')).toBeUndefined();
  });

  it('does not wait for its answer: it is answered while another session holds the counter row', async () => {
    expect(await countInTransaction('acc-locked', 100, 1)).toBeNull();
    const holder = new pg.Client({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${t.pgSchema}` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("UPDATE usage_counters SET messages = messages + 10 WHERE account_id = 'acc-locked'");
      let answered = false;
      const committed = db.transaction().execute(async (trx) => {
        await sql`SELECT 1`.execute(trx);
        await new UsageRepository(trx).countOrAbort('acc-locked', cycle, 100, 1);
        answered = true;
      });
      // The count is blocked behind the holder's row lock, yet the caller already went on.
      await expect.poll(() => answered).toBe(true);
      await holder.query('COMMIT');
      await committed;
    } finally {
      await holder.end();
    }
    expect(await used('acc-locked')).toBe(12);
  });

  it('tells its refusal from other database errors', () => {
    expect(isUsageCapRefusal(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isUsageCapRefusal(null)).toBe(false);
  });
});

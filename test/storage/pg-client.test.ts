// The pool's PostgreSQL client (src/storage/pg-client.ts): writes marked deferred() are answered
// at once inside a transaction and pipelined with what follows; their failures reach the caller
// at the next statement it waits for, and a transaction with a failed write keeps nothing. What
// is pipelined leaves in one write to the socket.
import type { Duplex } from 'node:stream';
import { CompiledQuery, type Kysely, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Storage, openStorage } from '../../src/storage/db.js';
import { PgClient } from '../../src/storage/pg-client.js';
import { deferred } from '../../src/storage/pg-prepared.js';
import { STORAGE_KINDS, type TestStorage, createTestStorage } from '../helpers/storage.js';

// The PostgreSQL tier (the global setup prints why it is skipped when DATABASE_URL is not set).
describe.skipIf(!STORAGE_KINDS.includes('postgres'))('PgClient: deferred writes (postgres)', () => {
  let base: TestStorage;
  /** One connection, so that every test after a failure runs on the connection that saw it. */
  let storage: Storage;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a scratch table outside the app's schema types
  let db: Kysely<any>;

  const insert = (id: string, value = 'v') => CompiledQuery.raw(deferred('INSERT INTO pipelined (id, value) VALUES ($1, $2)'), [id, value]);
  const ids = async () => (await sql<{ id: string }>`SELECT id FROM pipelined ORDER BY id`.execute(db)).rows.map((r) => r.id);

  beforeAll(async () => {
    base = await createTestStorage('postgres');
    storage = openStorage({ databaseUrl: process.env.DATABASE_URL, pgSchema: base.pgSchema, poolSize: 1 });
    db = storage.db;
    await sql`CREATE TABLE pipelined (id text PRIMARY KEY, value text NOT NULL)`.execute(db);
  });
  afterAll(async () => {
    await storage?.close();
    await base?.destroy();
  });
  beforeEach(async () => {
    await sql`DELETE FROM pipelined`.execute(db);
  });

  it('answers a deferred write at once, even while it waits on a lock, and applies it before the next statement', async () => {
    await sql`INSERT INTO pipelined (id, value) VALUES ('a', 'before')`.execute(db);
    // Another session holds the row: the deferred UPDATE cannot run until it lets go.
    const holder = new pg.Client({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${base.pgSchema}` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM pipelined WHERE id = 'a' FOR UPDATE");
      const seen = await db.transaction().execute(async (trx) => {
        // Writes are deferred once PostgreSQL has confirmed the transaction open (never in autocommit).
        await sql`SELECT 1`.execute(trx);
        const answer = await trx.executeQuery(CompiledQuery.raw(deferred("UPDATE pipelined SET value = 'after' WHERE id = $1"), ['a']));
        // Answered while the row is still locked: nothing of its outcome is known yet.
        expect(answer).toEqual({ rows: [], numAffectedRows: undefined });
        await holder.query('COMMIT');
        return (await sql<{ value: string }>`SELECT value FROM pipelined WHERE id = 'a'`.execute(trx)).rows[0].value;
      });
      expect(seen).toBe('after');
    } finally {
      await holder.end();
    }
    expect((await sql<{ value: string }>`SELECT value FROM pipelined WHERE id = 'a'`.execute(db)).rows[0].value).toBe('after');
  });

  /**
   * With 'taken' already stored: a transaction that waits for one statement, sends `written` as
   * deferred inserts (one of them 'taken'), then waits for one more statement if `waitAfter`.
   */
  const writeOverTaken = async (written: string[], waitAfter: boolean) => {
    await sql`INSERT INTO pipelined (id, value) VALUES ('taken', 'v')`.execute(db);
    return db.transaction().execute(async (trx) => {
      await sql`SELECT 1`.execute(trx);
      for (const id of written) await trx.executeQuery(insert(id));
      if (waitAfter) await sql`SELECT 1`.execute(trx);
    });
  };

  it("fails the next statement waited for with the deferred write's own error, and keeps nothing of the transaction", async () => {
    // The duplicate key (23505), not "current transaction is aborted" (25P02) of the statements after it.
    await expect(writeOverTaken(['b', 'taken', 'c'], true)).rejects.toMatchObject({ code: '23505' });
    expect(await ids()).toEqual(['taken']);
  });

  it('fails COMMIT when a deferred write failed and nothing was waited for after it (PostgreSQL answers it with a rollback)', async () => {
    await expect(writeOverTaken(['d', 'taken'], false)).rejects.toMatchObject({ code: '23505' });
    expect(await ids()).toEqual(['taken']);
  });

  it('commits the deferred writes of a transaction with it, in the order sent', async () => {
    await db.transaction().execute(async (trx) => {
      await sql`SELECT 1`.execute(trx);
      for (const id of ['e', 'f', 'g']) await trx.executeQuery(insert(id));
      await trx.executeQuery(CompiledQuery.raw(deferred('UPDATE pipelined SET value = $1 WHERE id = $2'), ['updated', 'f']));
    });
    expect(await ids()).toEqual(['e', 'f', 'g']);
    expect((await sql<{ value: string }>`SELECT value FROM pipelined WHERE id = 'f'`.execute(db)).rows[0].value).toBe('updated');
  });

  it('runs a deferred statement outside a transaction as any other: answered with its outcome, its failure its own', async () => {
    const answer = await db.executeQuery(insert('h'));
    expect(answer.numAffectedRows).toBe(1n);
    await expect(db.executeQuery(insert('h'))).rejects.toMatchObject({ code: '23505' });
    // The failure was reported where it happened: the next statement on the connection succeeds.
    expect(await ids()).toEqual(['h']);
  });

  it('forgets a deferred failure undone by a rollback to the savepoint before it, and commits the rest', async () => {
    await sql`INSERT INTO pipelined (id, value) VALUES ('taken', 'v')`.execute(db);
    await db.transaction().execute(async (trx) => {
      await sql`SELECT 1`.execute(trx);
      await trx.executeQuery(insert('j'));
      await sql`SAVEPOINT one_message`.execute(trx);
      await trx.executeQuery(insert('taken'));
      await sql`ROLLBACK TO SAVEPOINT one_message`.execute(trx);
      await trx.executeQuery(insert('k'));
    });
    expect(await ids()).toEqual(['j', 'k', 'taken']);
  });

  it('leaves the connection clean after a rolled-back transaction whose deferred write failed', async () => {
    await sql`INSERT INTO pipelined (id, value) VALUES ('taken', 'v')`.execute(db);
    const failing = db.transaction().execute(async (trx) => {
      await sql`SELECT 1`.execute(trx);
      await trx.executeQuery(insert('taken'));
      throw new Error('the caller gives up before waiting on anything');
    });
    await expect(failing).rejects.toThrow('the caller gives up');
    // The same (only) connection: neither the failure nor the aborted transaction carried over.
    await db.transaction().execute(async (trx) => {
      await trx.executeQuery(insert('i'));
    });
    expect(await ids()).toEqual(['i', 'taken']);
  });
});

describe.skipIf(!STORAGE_KINDS.includes('postgres'))('PgClient: writes to the socket (postgres)', () => {
  let base: TestStorage;
  let client: PgClient;
  /** Writes the socket made (one per write(2)/writev(2) Node issues), counted from a mark. */
  let writes = 0;

  beforeAll(async () => {
    base = await createTestStorage('postgres');
    client = new PgClient({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${base.pgSchema}` });
    await client.connect();
    await client.query('CREATE TABLE socket_writes (id text PRIMARY KEY)');
    const socket = client.connection.stream as Duplex & { _write: Duplex['_write']; _writev?: Duplex['_writev'] };
    const write = socket._write.bind(socket);
    const writev = socket._writev!.bind(socket);
    socket._write = (...args) => {
      writes++;
      write(...args);
    };
    socket._writev = (...args) => {
      writes++;
      writev(...args);
    };
  });
  afterAll(async () => {
    await client?.end();
    await base?.destroy();
  });

  it('sends begin with the first statement, and a run of deferred writes with the statement that ends it, in one write each', async () => {
    writes = 0;
    const begun = client.query('begin');
    const first = client.query('SELECT 1 AS one');
    await Promise.all([begun, first]);
    expect(writes).toBe(1);

    writes = 0;
    const runOfWrites = [client.query(deferred('INSERT INTO socket_writes (id) VALUES ($1)'), ['a']), client.query(deferred('INSERT INTO socket_writes (id) VALUES ($1)'), ['b'])];
    const counted = client.query('SELECT count(*)::int AS n FROM socket_writes');
    await Promise.all(runOfWrites);
    expect((await counted).rows[0].n).toBe(2);
    expect(writes).toBe(1);

    writes = 0;
    await client.query('commit');
    expect(writes).toBe(1);
    expect((await client.query('SELECT count(*)::int AS n FROM socket_writes')).rows[0].n).toBe(2);
  });
});

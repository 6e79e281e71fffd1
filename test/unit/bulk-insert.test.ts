// sqliteInsert: the ledger's multi-row INSERTs on SQLite, written as text (storage/bulk-insert.ts).
import { Kysely, SqliteDialect } from 'kysely';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { columnList, sqliteInsert } from '../../src/storage/bulk-insert.js';

type Row = { id: string; n: number | null; note: string | null };

describe('sqliteInsert', () => {
  let db: Kysely<{ t: Row }>;
  beforeEach(async () => {
    db = new Kysely<{ t: Row }>({ dialect: new SqliteDialect({ database: new Database(':memory:') }) });
    await db.schema.createTable('t').addColumn('id', 'text', (c) => c.primaryKey()).addColumn('n', 'integer').addColumn('note', 'text', (c) => c.defaultTo('default')).execute();
  });
  afterEach(() => db.destroy());

  it('writes every row in column order, undefined as NULL, with one placeholder per value', async () => {
    const rows = [
      { id: 'a', n: 0, note: '' },
      { id: 'b', n: null, note: undefined as unknown as null },
      { id: 'c', n: 7, note: "it's" },
    ];
    const columns = columnList<Row>({ id: 1, n: 1, note: 1 });
    expect(columns).toEqual(['id', 'n', 'note']);
    const query = sqliteInsert<Row>('t', columns, rows);
    expect(query.sql).toBe('INSERT INTO "t" ("id", "n", "note") VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?)');
    expect(query.parameters).toEqual(['a', 0, '', 'b', null, null, 'c', 7, "it's"]);
    await db.executeQuery(query);
    expect(await db.selectFrom('t').selectAll().orderBy('id').execute()).toEqual([
      { id: 'a', n: 0, note: '' },
      { id: 'b', n: null, note: null },
      { id: 'c', n: 7, note: "it's" },
    ]);
  });

  it('appends the tail: a conflicting row is skipped and RETURNING answers only the rows written', async () => {
    await db.executeQuery(sqliteInsert<Row>('t', ['id', 'n', 'note'], [{ id: 'a', n: 1, note: 'first' }]));
    const { rows } = await db.executeQuery<{ id: string }>(
      sqliteInsert<Row>('t', ['id', 'n', 'note'], [{ id: 'a', n: 2, note: 'again' }, { id: 'b', n: 3, note: 'new' }], 'ON CONFLICT ("id") DO NOTHING RETURNING "id"'),
    );
    expect(rows).toEqual([{ id: 'b' }]);
    expect(await db.selectFrom('t').selectAll().orderBy('id').execute()).toEqual([
      { id: 'a', n: 1, note: 'first' },
      { id: 'b', n: 3, note: 'new' },
    ]);
  });
});

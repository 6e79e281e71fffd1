import { CompiledQuery } from 'kysely';

/**
 * Every column of a row type, in the order given: `columnList<Row>({ a: 1, b: 1 })`. The compiler
 * refuses a list that misses a column or names one the row does not have.
 */
export function columnList<Row>(every: Record<keyof Row & string, 1>): (keyof Row & string)[] {
  return Object.keys(every) as (keyof Row & string)[];
}

/**
 * A multi-row INSERT for SQLite, written as text instead of through Kysely's query builder:
 * `INSERT INTO "table" ("c1", ...) VALUES (?, ...), ... <tail>` with the rows' values in
 * `columns` order (undefined written as NULL, as Kysely's SQLite compiler writes a missing value).
 * `tail` follows the VALUES list (ON CONFLICT ..., RETURNING ...). Table, columns and tail are
 * the caller's constants, never input.
 *
 * Measured reason (issue 11, bench email, worker process): Kysely builds a multi-row INSERT as one
 * node per value and compiles it by appending to the statement's text value by value; for the
 * ledger's wide rows (20-odd columns, up to 64 rows) that was about a quarter of the worker main
 * thread's allocations per mail (sampling heap profiler) and most of Kysely's CPU. The text here
 * is the same for every batch of a size, so SQLite's statement cache (storage/db.ts) compiles it
 * once.
 */
export function sqliteInsert<Row>(table: string, columns: readonly (keyof Row & string)[], rows: readonly Row[], tail = ''): CompiledQuery {
  const tuple = `(${columns.map(() => '?').join(', ')})`;
  const text = `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(', ')}) VALUES ${new Array<string>(rows.length).fill(tuple).join(', ')}${tail ? ` ${tail}` : ''}`;
  const parameters = new Array<unknown>(rows.length * columns.length);
  let at = 0;
  for (const row of rows) for (const column of columns) parameters[at++] = row[column] ?? null;
  return CompiledQuery.raw(text, parameters);
}

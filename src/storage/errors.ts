/** Unique violation on either engine (pg 23505, SQLite SQLITE_CONSTRAINT_PRIMARYKEY / _UNIQUE). */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

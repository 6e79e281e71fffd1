const MARK = '/* prepared:';
const MARK_END = ' */ ';
const DEFERRED = '/* deferred */ ';

/**
 * Marks a statement to run as a named prepared statement on PostgreSQL (each connection parses
 * and plans it once, then only binds and executes it). For the hot statements whose text never
 * changes (the send intake's): parsing, analysing and planning them on every group commit was
 * about a quarter of PostgreSQL's CPU per accepted send (perf, issue 11). The name must be unique
 * to the text (node-postgres refuses a name reused for another text). A statement that returns
 * `*` should not be marked: a column added by a migration while the statement is prepared makes
 * PostgreSQL refuse it ("cached plan must not change result type").
 */
export function prepared(name: string, text: string): string {
  return `${MARK}${name}${MARK_END}${text}`;
}

/**
 * Marks a write whose result its caller never reads. Inside a transaction the pool's client
 * (PgClient) answers it at once and sends it pipelined with the statements after it, so that a
 * run of such writes and the read that ends it cost one round trip; a failure of the write is
 * reported by the next statement the caller waits for (and by COMMIT). Its result is empty: no
 * rows, no row count. Outside a transaction it runs as any statement.
 */
export function deferred(text: string): string {
  return `${DEFERRED}${text}`;
}

/** What the marks of a statement's text ask for: its prepared name, and whether it is deferred. */
export function readMarks(text: string): { name: string | undefined; deferred: boolean } {
  const isDeferred = text.startsWith(DEFERRED);
  const rest = isDeferred ? DEFERRED.length : 0;
  if (!text.startsWith(MARK, rest)) return { name: undefined, deferred: isDeferred };
  const end = text.indexOf(MARK_END, rest + MARK.length);
  return { name: end > 0 ? text.slice(rest + MARK.length, end) : undefined, deferred: isDeferred };
}

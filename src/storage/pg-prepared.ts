import pg from 'pg';

const MARK = '/* prepared:';
const MARK_END = ' */ ';

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
 * The pool's client: a text marked by prepared() runs as a named statement; anything else as
 * node-postgres runs it (Kysely passes a text and its values).
 */
export class PreparingClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    const query = this.query.bind(this) as (...args: unknown[]) => unknown;
    // An instance property over node-postgres's many overloads: the arguments go through unchanged.
    this.query = ((...args: unknown[]) => {
      const [text, values] = args;
      if (args.length <= 2 && typeof text === 'string' && text.startsWith(MARK) && (values === undefined || Array.isArray(values))) {
        const end = text.indexOf(MARK_END, MARK.length);
        if (end > 0) return query({ name: text.slice(MARK.length, end), text, values });
      }
      return query(...args);
    }) as pg.Client['query'];
  }
}

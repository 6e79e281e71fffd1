import pg from 'pg';
import { readMarks } from './pg-prepared.js';

/** What a deferred statement answers at once: nobody reads it (deferred()). */
const DEFERRED_RESULT: pg.QueryResult = Object.freeze({ command: 'DEFERRED', rowCount: null, oid: 0, fields: [], rows: [] });

type QueryArgs = Parameters<pg.Client['query']>;

/**
 * The pool's client. A text marked by prepared() runs as a named prepared statement. The client
 * runs in node-postgres's pipeline mode, and inside a transaction it answers two kinds of
 * statements at once and sends them ahead of the next, so that their round trips overlap:
 * - Kysely's `begin` on an idle connection (sent with the transaction's first statement);
 * - writes marked by deferred(), once PostgreSQL has confirmed the transaction is open.
 * Measured (issue 11, bench postgres, CLARION_ROLE=api): a group commit of the send intake went
 * from six round trips (begin, read the recipients, insert the jobs, insert the messages, count
 * usage, commit) to three, each of them waiting on the other process and on a busy event loop;
 * with the usage count deferred too (UsageRepository.countOrAbort), two.
 *
 * Why it is safe: PostgreSQL runs a connection's statements in the order sent, so a statement
 * sent after a deferred one sees its effects, and inside a transaction a failed statement aborts
 * it: every later one fails until ROLLBACK. The first failure of a deferred statement is thrown
 * by the next statement the caller waits for (COMMIT included: on an aborted transaction
 * PostgreSQL answers COMMIT with a rollback, not an error), so the caller never takes a failed
 * write for a done one. Writes are deferred only in a transaction PostgreSQL has confirmed open,
 * never in autocommit, where a statement sent after a failed one would commit on its own. A
 * `begin` on an idle connection cannot fail but with the connection, and then so does what
 * follows it.
 */
export class PgClient extends pg.Client {
  /** Deferred statements sent and not yet answered (each settles, never rejects). */
  private readonly unanswered = new Set<Promise<void>>();
  /** The first failure among deferred statements, until a waited-for statement reports it. */
  private failure: Error | null = null;

  constructor(config?: string | pg.ClientConfig) {
    super({ ...(typeof config === 'string' ? { connectionString: config } : config), pipeline: true });
    const query = this.query.bind(this) as (...args: unknown[]) => Promise<pg.QueryResult>;
    // An instance property over node-postgres's many overloads: other calls go through unchanged.
    this.query = ((...args: QueryArgs) => {
      const [text, values] = args;
      if (args.length > 2 || typeof text !== 'string' || !(values === undefined || Array.isArray(values))) return query(...args);
      const marks = readMarks(text);
      // node-postgres copies a config object on each query: a text and its values are passed as they are.
      const send = () => (marks.name === undefined ? query(text, values) : query({ name: marks.name, text, values }));
      if (this.mayDefer(text, marks.deferred)) {
        this.holdWrites();
        return this.defer(send());
      }
      const answer = send();
      if (ROLLBACK.test(text)) return this.afterRollback(answer);
      return this.unanswered.size === 0 && this.failure === null ? answer : this.afterDeferred(answer);
    }) as pg.Client['query'];
  }

  private mayDefer(text: string, marked: boolean): boolean {
    const status = this.getTransactionStatus();
    if (marked) return status === 'T' && this.unanswered.size < MAX_UNANSWERED;
    return text === 'begin' && status === 'I' && this.unanswered.size === 0 && this.failure === null;
  }

  /**
   * Holds what is written to the socket until the end of this tick (Writable.cork, uncorked on
   * process.nextTick as Node's stream docs advise): the deferred statement and those sent after it
   * in the same run of the caller's code (the statement that ends the run among them) leave in
   * one write. Measured (issue 11, CPU profile of CLARION_ROLE=api on PostgreSQL): each write to
   * PostgreSQL's socket cost the event loop about 50 µs of wall time on the shared host (the woken
   * backend takes the CPU), against about 8 for an HTTP answer; a group commit wrote six times.
   */
  private holdWrites(): void {
    const socket = this.connection.stream;
    socket.cork();
    process.nextTick(() => socket.uncork());
  }

  private defer(answer: Promise<pg.QueryResult>): Promise<pg.QueryResult> {
    const settled: Promise<void> = answer.then(
      () => {
        this.unanswered.delete(settled);
      },
      (error: unknown) => {
        this.unanswered.delete(settled);
        this.failure ??= error instanceof Error ? error : new Error(String(error));
      },
    );
    this.unanswered.add(settled);
    return Promise.resolve(DEFERRED_RESULT);
  }

  /** A waited-for statement: answered after the deferred ones before it, and failing with their first failure. */
  private async afterDeferred(answer: Promise<pg.QueryResult>): Promise<pg.QueryResult> {
    try {
      return await answer;
    } finally {
      await this.settled();
      const failure = this.takeFailure();
      // eslint-disable-next-line no-unsafe-finally -- the deferred write's failure is the cause of this one's, or unseen otherwise
      if (failure !== undefined) throw failure;
    }
  }

  /**
   * ROLLBACK undoes the deferred writes with the rest, and ROLLBACK TO SAVEPOINT those sent since
   * the savepoint (one that failed before it would have failed SAVEPOINT, which is waited for):
   * their failure is not the caller's to see any more.
   */
  private async afterRollback(answer: Promise<pg.QueryResult>): Promise<pg.QueryResult> {
    try {
      return await answer;
    } finally {
      await this.settled();
      this.failure = null;
    }
  }

  private async settled(): Promise<void> {
    while (this.unanswered.size > 0) await Promise.all([...this.unanswered]);
  }

  private takeFailure(): Error | undefined {
    const failure = this.failure ?? undefined;
    this.failure = null;
    return failure;
  }
}

/** Kysely's `rollback` and `rollback to "savepoint"`. */
const ROLLBACK = /^rollback\b/i;

/** Deferred statements one connection holds unanswered at most (a bound on what a caller's loop may queue). */
const MAX_UNANSWERED = 64;

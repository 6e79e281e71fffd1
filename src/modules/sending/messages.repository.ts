import type SQLite from 'better-sqlite3';
import { CompiledQuery, type Kysely, PostgresAdapter, SqliteAdapter } from 'kysely';
import type { Queue } from '../../queue/port.js';
import type { CoreTables } from '../../storage/schema.js';
import { deferred, prepared } from '../../storage/pg-prepared.js';
import { sqliteInsert } from '../../storage/bulk-insert.js';
import { paddedToPowerOfTwo, powerOfTwoChunks } from '../../storage/statement-shapes.js';
import { SendJournal } from './messages.journal.js';
import { type AttemptRow, type DeliveryRow, MESSAGE_COLUMNS, type MessageRow, type SendingDb, type SendingTables } from './sending.tables.js';

/** Message rows per INSERT (24 parameters each; within SQLite's and PostgreSQL's limits). */
const MESSAGES_PER_INSERT = 500;
/** Tracking ids per read of a log's attempts: well under either engine's bound-parameter limit. */
const ATTEMPT_READ_CHUNK = 1000;


/**
 * PostgreSQL: a batch's message rows as one JSON parameter (json_populate_recordset over the
 * table's row type), so the statement's text is the same whatever the batch's size: a multi-row
 * VALUES list has 24 parameters per row, which PostgreSQL parses, analyses and plans anew on every
 * batch and Kysely builds and compiles (measured, issue 11: parse, analysis and planning were
 * about a third of PostgreSQL's CPU per accepted send). One JSON.stringify rather than an array
 * per column: node-postgres escapes each array element in JavaScript (the request's JSON is full
 * of quotes), about 3% of the API process's main thread (CPU profile, CLARION_ROLE=api).
 */
// Deferred: inside the intake's transaction it is sent with the usage count that follows it (PgClient).
const INSERT_MESSAGE_ROWS = deferred(
  prepared('intake_message_rows', `INSERT INTO messages (${MESSAGE_COLUMNS.join(', ')}) SELECT ${MESSAGE_COLUMNS.join(', ')} FROM json_populate_recordset(NULL::messages, $1::json)`),
);

/**
 * The job that routes messages: `{ trackingId }` for one (a scheduled send, or one enqueued
 * before chunks), `{ trackingIds }` for a chunk of immediate sends of one group commit on
 * PostgreSQL (see insertAccepted). DeliveryWorker.processMessageJobs handles both.
 */
export const PROCESS_MESSAGE_JOB = 'message.process';
/** The data of a PROCESS_MESSAGE_JOB job. */
export type ProcessMessageJobData = { trackingId: string; trackingIds?: undefined } | { trackingIds: string[]; trackingId?: undefined };
/**
 * Immediate sends per PROCESS_MESSAGE_JOB on PostgreSQL (as SQLite's ingest chunks). The worker
 * claims 4 of these jobs a run there (DeliveryWorker.register).
 */
export const MESSAGES_PER_PROCESS_JOB = 16;
/** The messages of a PROCESS_MESSAGE_JOB job. */
export const messagesOfJob = (data: ProcessMessageJobData): string[] => data.trackingIds ?? [data.trackingId];

/** An accepted send: its message row (job_id null) and the job that will process it. */
export interface AcceptedSend {
  message: MessageRow;
  job: { name: string; data: unknown; runAt: Date | null };
}

/**
 * Messages, their deliveries and attempts. Every read is scoped by environment or account.
 * On SQLite, accepted immediate sends wait in a journal before they are message rows
 * (messages.journal.ts, with the measured reason); every read here that looks for sends
 * includes them, so no caller needs to know. Every write after acceptance goes through the
 * delivery ledger (modules/delivery).
 */
export class MessagesRepository {
  private readonly db: SendingDb;
  /** SQLite only. */
  private readonly journal: SendJournal | null;
  private readonly postgres: boolean;
  /** `sqlite`: the SQLite connection, for the journal's prepared statements inside a transaction (the intake's). */
  constructor(db: Kysely<CoreTables>, sqlite?: SQLite.Database) {
    this.db = db.withTables<SendingTables>();
    const adapter = db.getExecutor().adapter;
    this.journal = adapter instanceof SqliteAdapter ? new SendJournal(db, sqlite) : null;
    this.postgres = adapter instanceof PostgresAdapter;
  }

  /**
   * Writes accepted sends (of one group commit, inside its transaction) with the jobs that
   * process them: a scheduled send as a message row and its job at runAt; an immediate one the
   * same on PostgreSQL (one multi-row INSERT for the batch), journaled on SQLite.
   */
  async insertAccepted(sends: AcceptedSend[], jobs: Pick<Queue, 'enqueueMany'>): Promise<void> {
    const direct: AcceptedSend[] = [];
    const journaled: MessageRow[] = [];
    for (const send of sends) {
      if (this.journal && send.job.runAt === null) journaled.push(send.message);
      else direct.push(send);
    }
    if (direct.length > 0) {
      const rows = await this.withJobs(direct, jobs);
      if (this.postgres) {
        await this.db.executeQuery(CompiledQuery.raw(INSERT_MESSAGE_ROWS, [JSON.stringify(rows)]));
      } else {
        // Bounded statements: a broadcast's batch may hold thousands of sends.
        for (let i = 0; i < rows.length; i += MESSAGES_PER_INSERT) await this.db.insertInto('messages').values(rows.slice(i, i + MESSAGES_PER_INSERT)).execute();
      }
    }
    await this.journal?.append(journaled, jobs);
  }

  /**
   * Enqueues the jobs of sends written as rows, and answers the rows with their job ids (those
   * with a job of their own first, then the chunks'). A
   * scheduled send gets its own job (its schedule can move or be canceled alone). On PostgreSQL
   * immediate sends share one PROCESS_MESSAGE_JOB per MESSAGES_PER_PROCESS_JOB of them (as
   * SQLite's journal chunks do): a job row and its index entries per send were about a third of
   * PostgreSQL's CPU per accepted send (measured, bench postgres: 53 µs per send with them, 35
   * without).
   */
  private async withJobs(sends: AcceptedSend[], jobs: Pick<Queue, 'enqueueMany'>): Promise<MessageRow[]> {
    const own = sends.filter((send) => !this.postgres || send.job.runAt !== null);
    const immediate = this.postgres ? sends.filter((send) => send.job.runAt === null) : [];
    const chunks: AcceptedSend[][] = [];
    for (let i = 0; i < immediate.length; i += MESSAGES_PER_PROCESS_JOB) chunks.push(immediate.slice(i, i + MESSAGES_PER_PROCESS_JOB));
    const ids = await jobs.enqueueMany(this.db, [
      ...own.map(({ job }) => ({ name: job.name, data: job.data, options: job.runAt ? { runAt: job.runAt } : {} })),
      ...chunks.map((chunk) => ({ name: PROCESS_MESSAGE_JOB, data: { trackingIds: chunk.map((send) => send.message.tracking_id) } satisfies ProcessMessageJobData })),
    ]);
    return [
      ...own.map((send, i) => ({ ...send.message, job_id: ids[i] })),
      ...chunks.flatMap((chunk, k) => chunk.map((send) => ({ ...send.message, job_id: ids[own.length + k] }))),
    ];
  }

  /**
   * Makes every accepted send a row of `messages`, for a query that reads the table itself (a
   * log query): on SQLite the journaled sends are written now, each chunk in its own statement
   * (no long write lock); their ingest jobs still process them (they find the rows written).
   */
  async flushAccepted(): Promise<void> {
    if (!this.journal) return;
    for (const seq of await this.journal.pendingSeqs()) {
      const rows = await this.journal.chunk(seq);
      if (rows) await this.insertMessagesIfAbsent(rows);
    }
  }

  /** The sends of an ingest job's chunk, or null once it was dropped (SQLite's journal; null elsewhere). */
  async pendingChunk(seq: number): Promise<MessageRow[] | null> {
    return this.journal ? this.journal.chunk(seq) : null;
  }

  /** Drops an ingest job's chunk once its sends are stored and processed. */
  async dropPendingChunk(seq: number): Promise<void> {
    await this.journal?.remove(seq);
  }

  /** Inserts message rows; one already present (a re-run after a crash) is left as it is. */
  async insertMessagesIfAbsent(rows: MessageRow[]): Promise<void> {
    if (rows.length === 0) return;
    if (this.postgres) {
      await this.db
        .insertInto('messages')
        .values(rows)
        .onConflict((oc) => oc.column('tracking_id').doNothing())
        .execute();
      return;
    }
    // On SQLite in a few statement sizes, each compiled once (statement-shapes.ts).
    for (const chunk of powerOfTwoChunks(rows, 64)) await this.db.executeQuery(sqliteInsert('messages', MESSAGE_COLUMNS, chunk, 'ON CONFLICT ("tracking_id") DO NOTHING'));
  }

  findMessage(envId: string, trackingId: string): Promise<MessageRow | undefined> {
    return this.db.selectFrom('messages').selectAll().where('env_id', '=', envId).where('tracking_id', '=', trackingId).executeTakeFirst();
  }

  /** Worker-side read: the job carries the ids it was created with. */
  findMessageForWork(trackingId: string): Promise<MessageRow | undefined> {
    return this.db.selectFrom('messages').selectAll().where('tracking_id', '=', trackingId).executeTakeFirst();
  }

  findDelivery(deliveryId: string): Promise<DeliveryRow | undefined> {
    return this.db.selectFrom('deliveries').selectAll().where('id', '=', deliveryId).executeTakeFirst();
  }

  /** Worker-side read of a batch's deliveries (delivery jobs carry the delivery id). */
  findDeliveries(deliveryIds: string[]): Promise<DeliveryRow[]> {
    if (deliveryIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('deliveries').selectAll().where('id', 'in', paddedToPowerOfTwo(deliveryIds)).execute();
  }

  /** The deliveries of these messages still waiting for their first attempt (pending, none made). */
  firstAttemptsPending(trackingIds: string[]): Promise<DeliveryRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('deliveries').selectAll().where('tracking_id', 'in', paddedToPowerOfTwo(trackingIds)).where('status', '=', 'pending').where('attempts', '=', 0).execute();
  }

  /** Worker-side read of a batch's messages. */
  findMessagesForWork(trackingIds: string[]): Promise<MessageRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('messages').selectAll().where('tracking_id', 'in', paddedToPowerOfTwo(trackingIds)).execute();
  }

  /** The delivery a provider message id belongs to (inbound replies, callbacks). */
  findDeliveryByProviderId(channel: string, providerMessageId: string): Promise<DeliveryRow | undefined> {
    return this.db.selectFrom('deliveries').selectAll().where('channel', '=', channel).where('provider_message_id', '=', providerMessageId).executeTakeFirst();
  }

  deliveriesOf(trackingIds: string[]): Promise<DeliveryRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('deliveries').selectAll().where('tracking_id', 'in', trackingIds).execute();
  }

  /**
   * The attempts of the deliveries of these messages of one account's environments (a log's
   * view), by delivery and attempt number. In chunks of tracking ids: a log query reads thousands.
   */
  async attemptsOf(scope: { accountId: string; envIds: string[] }, trackingIds: string[]): Promise<AttemptRow[]> {
    const rows: AttemptRow[] = [];
    if (scope.envIds.length === 0) return rows;
    for (let i = 0; i < trackingIds.length; i += ATTEMPT_READ_CHUNK) {
      const chunk = await this.db
        .selectFrom('delivery_attempts')
        .innerJoin('deliveries', 'deliveries.id', 'delivery_attempts.delivery_id')
        .selectAll('delivery_attempts')
        .where('deliveries.account_id', '=', scope.accountId)
        .where('deliveries.env_id', 'in', scope.envIds)
        .where('deliveries.tracking_id', 'in', trackingIds.slice(i, i + ATTEMPT_READ_CHUNK))
        .orderBy('delivery_attempts.delivery_id')
        .orderBy('delivery_attempts.attempt')
        .execute();
      rows.push(...chunk);
    }
    return rows;
  }

  /** One delivery's attempts, by number (a retry's look at the attempts before it). */
  attemptsOfDelivery(deliveryId: string): Promise<AttemptRow[]> {
    return this.db.selectFrom('delivery_attempts').selectAll().where('delivery_id', '=', deliveryId).orderBy('attempt').execute();
  }

  /** Worker-side read of a batch: the jobs carry the ids they were created with. */
  messagesForWork(trackingIds: string[]): Promise<MessageRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('messages').selectAll().where('tracking_id', 'in', paddedToPowerOfTwo(trackingIds)).execute();
  }

  /**
   * An account's accepted sends by tracking id, newest first (log lookups span the account's
   * environments), those still in the journal included (state 'queued'). A send ingested
   * between the reads is written to messages before it leaves the journal, so the last read
   * finds it.
   */
  async messagesByIds(accountId: string, trackingIds: string[]): Promise<MessageRow[]> {
    const stored = await this.storedByIds(accountId, trackingIds);
    if (!this.journal || stored.length === trackingIds.length) return stored;
    const found = new Set(stored.map((m) => m.tracking_id));
    const pending = await this.journal.pendingByIds(accountId, trackingIds.filter((id) => !found.has(id)));
    for (const m of pending) found.add(m.tracking_id);
    const moved = await this.storedByIds(accountId, trackingIds.filter((id) => !found.has(id)));
    return [...stored, ...pending, ...moved].sort((a, b) => (a.received_at < b.received_at ? 1 : a.received_at > b.received_at ? -1 : 0));
  }

  private storedByIds(accountId: string, trackingIds: string[]): Promise<MessageRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db
      .selectFrom('messages')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('tracking_id', 'in', trackingIds)
      .orderBy('received_at', 'desc')
      .execute();
  }
}

import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import { jsonString } from '../../json-text.js';
import { heldSqlite } from '../../storage/db.js';
import type { CoreTables } from '../../storage/schema.js';
import type { Queue } from '../../queue/port.js';
import { MESSAGE_COLUMNS, type MessageRow, type SendingDb, type SendingTables } from './sending.tables.js';

/** The job that moves a journal chunk into messages and processes its sends (DeliveryWorker.ingestSends). */
export const INGEST_SENDS_JOB = 'sends.ingest';
/** Sends per journal chunk, and so per ingest job. */
export const INGEST_CHUNK = 16;
/** Chunks per INSERT (a broadcast's batch may make hundreds). */
const CHUNKS_PER_INSERT = 100;

/**
 * The SQLite side of MessagesRepository: accepted immediate sends are journaled instead of
 * being written as message rows with a job each. Measured reason (issue 3 note): a message row
 * and a job per send are seven B-tree inserts; up to 16 sends as one `send_intake` row (a JSON
 * array) with one `sends.ingest` job took the API process from about 31% to about 51% of the
 * bare route's rate. The ingest job writes the message rows and processes them. Nothing outside
 * MessagesRepository sees the journal: its reads by tracking id include pending entries, and
 * flushAccepted() writes them as rows before a query reads messages directly.
 */
export class SendJournal {
  private readonly db: SendingDb;
  private readonly sqlite: SQLite.Database | null;
  /** `sqlite`: the connection, for append's prepared insert inside the caller's transaction. */
  constructor(db: Kysely<CoreTables>, sqlite?: SQLite.Database) {
    this.db = db.withTables<SendingTables>();
    this.sqlite = heldSqlite(db, sqlite);
  }

  /**
   * Journals immediate sends in chunks of INGEST_CHUNK, each with its ingest job: one INSERT of
   * the chunks and one of their jobs per batch (Kysely's cost is per statement).
   */
  async append(rows: MessageRow[], jobs: Pick<Queue, 'enqueueMany'>): Promise<void> {
    if (rows.length === 0) return;
    // A chunk's time is its last send's; rows are in arrival order.
    const createdAt = rows[rows.length - 1].received_at;
    const chunks: { messages: string; created_at: string; first_id: string; last_id: string }[] = [];
    for (let i = 0; i < rows.length; i += INGEST_CHUNK) {
      const chunk = rows.slice(i, i + INGEST_CHUNK);
      let first = chunk[0].tracking_id;
      let last = first;
      for (const { tracking_id: id } of chunk) {
        if (id < first) first = id;
        if (id > last) last = id;
      }
      chunks.push({ messages: journalChunk(chunk.map((m) => journalEntry(m, m.user_email, m.user_number))), created_at: createdAt, first_id: first, last_id: last });
    }
    const seqs: number[] = [];
    // On the hot path a prepared statement per chunk: cheaper than Kysely building and compiling
    // one multi-row INSERT for a group commit's few chunks (measured, issue 11).
    const insert = this.sqlite?.prepare('INSERT INTO send_intake (messages, created_at, first_id, last_id) VALUES (@messages, @created_at, @first_id, @last_id)');
    if (insert) for (const chunk of chunks) seqs.push(Number(insert.run(chunk).lastInsertRowid));
    for (let i = 0; !insert && i < chunks.length; i += CHUNKS_PER_INSERT) {
      const inserted = await this.db.insertInto('send_intake').values(chunks.slice(i, i + CHUNKS_PER_INSERT)).returning('seq').execute();
      seqs.push(...inserted.map((r) => r.seq));
    }
    await jobs.enqueueMany(this.db, seqs.map((seq) => ({ name: INGEST_SENDS_JOB, data: { seq } })));
  }

  /** The message rows of a chunk, or null once ingested. */
  async chunk(seq: number): Promise<MessageRow[] | null> {
    const row = await this.db.selectFrom('send_intake').select('messages').where('seq', '=', seq).executeTakeFirst();
    return row ? parseMessages(row.messages) : null;
  }

  async remove(seq: number): Promise<void> {
    await this.db.deleteFrom('send_intake').where('seq', '=', seq).execute();
  }

  /** Sequence numbers of the chunks waiting to be ingested, oldest first. */
  async pendingSeqs(): Promise<number[]> {
    return (await this.db.selectFrom('send_intake').select('seq').orderBy('seq').execute()).map((r) => r.seq);
  }

  /**
   * Pending sends of an account among `trackingIds`: only the chunks whose id range holds one of
   * them are read (index send_intake_id_range), plus any written before ranges were recorded.
   */
  async pendingByIds(accountId: string, trackingIds: string[]): Promise<MessageRow[]> {
    if (trackingIds.length === 0) return [];
    const seqs = new Set<number>();
    for (const id of trackingIds) {
      const rows = await this.db.selectFrom('send_intake').select('seq').where('last_id', '>=', id).where('first_id', '<=', id).execute();
      for (const row of rows) seqs.add(row.seq);
    }
    for (const row of await this.db.selectFrom('send_intake').select('seq').where('last_id', 'is', null).execute()) seqs.add(row.seq);
    if (seqs.size === 0) return [];
    const chunks = await this.db.selectFrom('send_intake').select('messages').where('seq', 'in', [...seqs]).execute();
    const wanted = new Set(trackingIds);
    return chunks.flatMap((c) => parseMessages(c.messages)).filter((m) => m.account_id === accountId && wanted.has(m.tracking_id));
  }
}

/**
 * The columns a journaled send can carry, in the order of a chunk entry, the request last. A
 * journaled send is an immediate one: state 'queued', no job, no schedule, not processed; every
 * other column is null.
 */
const ENTRY_COLUMNS = [
  'tracking_id',
  'account_id',
  'env_id',
  'notification_id',
  'user_id',
  'user_email',
  'user_number',
  'template_id',
  'sub_notification_id',
  'ip',
  'agent',
  'received_at',
  'request',
] as const satisfies readonly (keyof MessageRow)[];
const REQUEST_INDEX = ENTRY_COLUMNS.length - 1;
const EMAIL_INDEX = ENTRY_COLUMNS.indexOf('user_email');
const NUMBER_INDEX = ENTRY_COLUMNS.indexOf('user_number');

/**
 * One journaled send as chunk text: a positional JSON array with the request (already JSON)
 * embedded as it is, and the recipient's stored email and number. Against message objects with
 * the request as an escaped string this is about a third fewer bytes to commit, and no second
 * escaping pass over the request on the hot path.
 */
export function journalEntry(message: MessageRow, userEmail: string | null, userNumber: string | null): string {
  let text = '[';
  for (let i = 0; i < REQUEST_INDEX; i++) {
    const value = i === EMAIL_INDEX ? userEmail : i === NUMBER_INDEX ? userNumber : message[ENTRY_COLUMNS[i]];
    text += `${i === 0 ? '' : ','}${entryValue(value)}`;
  }
  return `${text},${message.request}]`;
}

/**
 * A column of an entry as JSON.stringify writes it in an array (null for null or undefined),
 * quoted by jsonString: one JSON.stringify call for the whole entry cost about as much as the
 * rest of journaling a send (measured, issue 11).
 */
function entryValue(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  return typeof value === 'string' ? jsonString(value) : JSON.stringify(value);
}

/** The text of a chunk of journalEntry texts. */
export function journalChunk(entries: string[]): string {
  return `[${entries.join(',')}]`;
}

/**
 * A chunk's message rows. Entries are positional arrays (journalEntry); chunks written before
 * that format hold message objects without their null columns, and still parse.
 */
export function parseMessages(json: string): MessageRow[] {
  return (JSON.parse(json) as unknown[]).map((entry) => {
    const row = {} as Record<string, unknown>;
    if (Array.isArray(entry)) {
      for (const column of MESSAGE_COLUMNS) row[column] = null;
      ENTRY_COLUMNS.forEach((column, i) => {
        row[column] = i === REQUEST_INDEX ? JSON.stringify(entry[i]) : entry[i];
      });
      row.state = 'queued';
    } else {
      const partial = entry as Partial<MessageRow>;
      for (const column of MESSAGE_COLUMNS) row[column] = partial[column] ?? null;
    }
    return row as MessageRow;
  });
}

import type SQLite from 'better-sqlite3';
import { type Kysely, SqliteAdapter } from 'kysely';
import type { Queue } from '../../queue/port.js';
import type { CoreTables } from '../../storage/schema.js';
import { SendJournal } from './messages.journal.js';
import type { AttemptRow, DeliveryRow, MessageRow, SendingDb, SendingTables } from './sending.tables.js';

/** Message rows per INSERT (24 parameters each; within SQLite's and PostgreSQL's limits). */
const MESSAGES_PER_INSERT = 500;

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
  /** `sqlite`: the SQLite connection, for the journal's prepared statements inside a transaction (the intake's). */
  constructor(db: Kysely<CoreTables>, sqlite?: SQLite.Database) {
    this.db = db.withTables<SendingTables>();
    this.journal = db.getExecutor().adapter instanceof SqliteAdapter ? new SendJournal(db, sqlite) : null;
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
      const ids = await jobs.enqueueMany(
        this.db,
        direct.map(({ job }) => ({ name: job.name, data: job.data, options: job.runAt ? { runAt: job.runAt } : {} })),
      );
      const rows = direct.map(({ message }, i) => ({ ...message, job_id: ids[i] }));
      // Bounded statements: a broadcast's batch may hold thousands of sends.
      for (let i = 0; i < rows.length; i += MESSAGES_PER_INSERT) await this.db.insertInto('messages').values(rows.slice(i, i + MESSAGES_PER_INSERT)).execute();
    }
    await this.journal?.append(journaled, jobs);
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
    await this.db
      .insertInto('messages')
      .values(rows)
      .onConflict((oc) => oc.column('tracking_id').doNothing())
      .execute();
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
    return this.db.selectFrom('deliveries').selectAll().where('id', 'in', deliveryIds).execute();
  }

  /** Worker-side read of a batch's messages. */
  findMessagesForWork(trackingIds: string[]): Promise<MessageRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('messages').selectAll().where('tracking_id', 'in', trackingIds).execute();
  }

  /** The delivery a provider message id belongs to (inbound replies, callbacks). */
  findDeliveryByProviderId(channel: string, providerMessageId: string): Promise<DeliveryRow | undefined> {
    return this.db.selectFrom('deliveries').selectAll().where('channel', '=', channel).where('provider_message_id', '=', providerMessageId).executeTakeFirst();
  }

  deliveriesOf(trackingIds: string[]): Promise<DeliveryRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('deliveries').selectAll().where('tracking_id', 'in', trackingIds).execute();
  }

  attemptsOf(deliveryId: string): Promise<AttemptRow[]> {
    return this.db.selectFrom('delivery_attempts').selectAll().where('delivery_id', '=', deliveryId).orderBy('attempt').execute();
  }

  /** Worker-side read of a batch: the jobs carry the ids they were created with. */
  messagesForWork(trackingIds: string[]): Promise<MessageRow[]> {
    if (trackingIds.length === 0) return Promise.resolve([]);
    return this.db.selectFrom('messages').selectAll().where('tracking_id', 'in', trackingIds).execute();
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

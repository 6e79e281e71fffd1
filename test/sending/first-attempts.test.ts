// The job that routes a send makes its deliveries' first attempts itself, without a delivery job
// per delivery: a retry gets a delivery.run job (due after its backoff), written with the attempt;
// a re-run of the routing job after a crash makes the first attempts its first run left, once.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeliveryTables } from '../../src/modules/delivery/delivery.tables.js';
import { DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import { MessagesRepository } from '../../src/modules/sending/messages.repository.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import type { JobContext } from '../../src/queue/port.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { sendEmails } from '../helpers/sends.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('first attempts made by the routing job (%s)', (kind) => {
  const db = (t: TestContext) => t.deps.db.withTables<SendingTables & DeliveryTables>();
  /** delivery.run jobs in the queue's table, whatever their state. */
  const deliveryJobs = async (t: TestContext): Promise<number> => {
    if (kind === 'sqlite') {
      const { rows } = await sql<{ n: number }>`select count(*) as n from queue_jobs where name = 'delivery.run'`.execute(t.deps.db);
      return Number(rows[0].n);
    }
    const { rows: schema } = await sql<{ s: string }>`select current_schema() as s`.execute(t.deps.db);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(`${schema[0].s}_boss.job`)} where name = 'delivery.run'`.execute(t.deps.db);
    return rows[0].n;
  };
  const deliveriesOf = (t: TestContext, trackingIds: string[]) =>
    db(t).selectFrom('deliveries').select(['id', 'tracking_id', 'status', 'attempts']).where('tracking_id', 'in', trackingIds).orderBy('tracking_id').execute();

  describe('with the workers', () => {
    let t: TestContext;
    let smtp: SmtpPeer;
    beforeAll(async () => {
      // The first message is deferred (451 to its DATA), every later one accepted.
      smtp = await startSmtpPeer({ rejectData: 451, rejectDataTimes: 1 });
      t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
    });
    afterAll(async () => {
      await t.close();
      await smtp.close();
    });

    it('sends without a delivery job; the retry of a deferred mail runs in one', async () => {
      const [deferred] = await sendEmails(t, 'first_try', ['later@example.com']);
      const [retried] = await eventually(async () => {
        const rows = await deliveriesOf(t, [deferred]);
        return rows[0]?.status === 'sent' ? rows : undefined;
      }, 10_000, 'the deferred mail sent on its retry');
      expect(retried.attempts).toBe(2);
      const attempts = await db(t).selectFrom('delivery_attempts').select(['attempt', 'outcome']).where('delivery_id', '=', retried.id).orderBy('attempt').execute();
      expect(attempts).toEqual([
        { attempt: 1, outcome: 'retry' },
        { attempt: 2, outcome: 'success' },
      ]);
      // The retry's job, and no other.
      expect(await deliveryJobs(t)).toBe(1);

      const trackingIds = await sendEmails(t, 'first_try', ['a@example.com', 'b@example.com'], 'ft');
      const sent = await eventually(async () => {
        const rows = await deliveriesOf(t, trackingIds);
        return rows.length === 2 && rows.every((r) => r.status === 'sent') ? rows : undefined;
      }, 10_000, 'both mails sent');
      expect(sent.map((r) => r.attempts)).toEqual([1, 1]);
      expect(await deliveryJobs(t)).toBe(1);
      expect(smtp.messages.map((m) => m.envelope.to[0]).sort()).toEqual(['a@example.com', 'b@example.com', 'later@example.com']);
    });
  });

  describe('a re-run of the routing job', () => {
    let t: TestContext;
    let smtp: SmtpPeer;
    beforeAll(async () => {
      smtp = await startSmtpPeer();
      // No workers: the test runs the jobs' handlers itself.
      t = await createTestContext(kind, { config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
    });
    afterAll(async () => {
      await t.close();
      await smtp.close();
    });
    const job = (name: string, attempt: number): JobContext => ({ id: '', name, attempt, maxAttempts: 10 });

    it('makes the first attempts a run killed after routing left, and only once', async () => {
      const trackingIds = await sendEmails(t, 'resumed', ['r0@example.com', 'r1@example.com']);
      const { executors, close } = buildExecutors(t.deps, t.services);
      const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
      try {
        // The first run, killed once it had routed: messages processed, deliveries pending with no attempt, no job for them.
        const seqs = kind === 'sqlite' ? (await db(t).selectFrom('send_intake').select('seq').orderBy('seq').execute()).map((r) => r.seq) : [];
        if (kind === 'sqlite') {
          // The journal's chunks stay (the ingest job drops them only after the first attempts).
          const repo = new MessagesRepository(t.deps.db);
          for (const seq of seqs) await repo.insertMessagesIfAbsent((await repo.pendingChunk(seq))!);
        }
        expect(await worker.processMessages(trackingIds)).toEqual([undefined, undefined]);
        expect((await deliveriesOf(t, trackingIds)).map((d) => [d.status, d.attempts])).toEqual([
          ['pending', 0],
          ['pending', 0],
        ]);
        expect(await deliveryJobs(t)).toBe(0);
        expect(smtp.messages).toHaveLength(0);

        // The job again, after its lock expired: SQLite's ingest job (its chunks), PostgreSQL's message.process.
        const rerun = () =>
          kind === 'sqlite'
            ? worker.ingestChunks(
                seqs.map((seq) => ({ data: { seq }, job: job('sends.ingest', 2) })),
                { makeFirstAttempts: true },
              )
            : worker.processMessageJobs(trackingIds.map((trackingId) => ({ data: { trackingId }, job: job('message.process', 2) })));
        expect((await rerun()).every((r) => r === undefined)).toBe(true);
        await smtp.waitFor(2);
        expect((await deliveriesOf(t, trackingIds)).map((d) => [d.status, d.attempts])).toEqual([
          ['sent', 1],
          ['sent', 1],
        ]);
        if (kind === 'sqlite') expect(await db(t).selectFrom('send_intake').select('seq').execute()).toEqual([]);

        // Once more (say, the completion was lost): nothing is left to make.
        if (kind === 'postgres') expect((await rerun()).every((r) => r === undefined)).toBe(true);
        else expect(await worker.processMessageJobs(trackingIds.map((trackingId) => ({ data: { trackingId }, job: job('message.process', 3) })))).toEqual([undefined, undefined]);
        expect(smtp.messages.map((m) => m.envelope.to[0]).sort()).toEqual(['r0@example.com', 'r1@example.com']);
        expect(await deliveryJobs(t)).toBe(0);
      } finally {
        await worker.close();
        await close();
      }
    });

    it('makes a first attempt once when a re-run comes while the first run is still making it (its lock expired)', async () => {
      const trackingIds = await sendEmails(t, 'overlap', ['o0@example.com', 'o1@example.com']);
      const { executors, close } = buildExecutors(t.deps, t.services);
      const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
      const before = smtp.messages.length;
      try {
        if (kind === 'sqlite') {
          // Route by hand (the chunks' rows stored, the messages processed), as a run killed after routing leaves them.
          const repo = new MessagesRepository(t.deps.db);
          for (const { seq } of await db(t).selectFrom('send_intake').select('seq').orderBy('seq').execute()) await repo.insertMessagesIfAbsent((await repo.pendingChunk(seq))!);
        }
        expect(await worker.processMessages(trackingIds)).toEqual([undefined, undefined]);
        // Two runs of the job at once in this process: both find the first attempts missing.
        const run = (attempt: number) => worker.processMessageJobs(trackingIds.map((trackingId) => ({ data: { trackingId }, job: job('message.process', attempt) })));
        expect(await Promise.all([run(2), run(3)])).toEqual([
          [undefined, undefined],
          [undefined, undefined],
        ]);
        expect(smtp.messages.slice(before).map((m) => m.envelope.to[0]).sort()).toEqual(['o0@example.com', 'o1@example.com']);
        expect((await deliveriesOf(t, trackingIds)).map((d) => [d.status, d.attempts])).toEqual([
          ['sent', 1],
          ['sent', 1],
        ]);
      } finally {
        await worker.close();
        await close();
      }
    });
  });
});

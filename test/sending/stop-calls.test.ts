// A graceful stop (SIGTERM) gives the provider calls under way a bounded time to end, and records
// their outcome before the executors and storage close: a first attempt handed over to its
// stand-by job (it outlived the routing job's budget, so no job holds it) included. Without that,
// a mail the server had accepted went unrecorded and its stand-by job sent it again after the
// restart. A call still unanswered at the bound is left to its stand-by job.
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import type { DeliveryTables } from '../../src/modules/delivery/delivery.tables.js';
import { HANDOVER_DELAY_MS, type StopGraceTimer } from '../../src/modules/sending/delivery-runs.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { startWorkers } from '../../src/workers.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { sendEmails } from '../helpers/sends.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/** The stop's grace, ended by hand: `began` resolves once a stop waits on calls under way. */
function manualGrace() {
  let began!: () => void;
  const waiting = new Promise<'waiting'>((resolve) => {
    began = () => resolve('waiting');
  });
  let end = () => {};
  const timer: StopGraceTimer = (_ms, signal) =>
    new Promise<void>((resolve) => {
      end = resolve;
      signal.addEventListener('abort', () => resolve(), { once: true });
      began();
    });
  return { timer, waiting, end: () => end() };
}

describe.each(STORAGE_KINDS)('a graceful stop with provider calls under way (%s)', (kind) => {
  let t: TestContext | undefined;
  let smtp: SmtpPeer | undefined;
  afterEach(async () => {
    smtp?.release();
    await t?.close();
    await smtp?.close();
    t = undefined;
    smtp = undefined;
  });

  const db = (ctx: TestContext) => ctx.deps.db.withTables<SendingTables & DeliveryTables>();
  const delivery = async (ctx: TestContext, trackingId: string) => db(ctx).selectFrom('deliveries').select(['id', 'status', 'attempts']).where('tracking_id', '=', trackingId).executeTakeFirstOrThrow();
  const log = async (ctx: TestContext, trackingId: string) => (await ctx.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: ctx.auth })).json<{ logs: Record<string, unknown>[] }>().logs[0];
  /** The delivery.run jobs of a delivery: whether each still waits to run. */
  const waitingJobs = async (ctx: TestContext, deliveryId: string): Promise<boolean[]> => {
    if (kind === 'sqlite') {
      const { rows } = await sql<{ data: string; state: string }>`select data, state from queue_jobs where name = 'delivery.run'`.execute(ctx.deps.db);
      return rows.filter((r) => (JSON.parse(r.data) as { deliveryId: string }).deliveryId === deliveryId).map((r) => r.state === 'waiting');
    }
    const { rows: schema } = await sql<{ s: string }>`select current_schema() as s`.execute(ctx.deps.db);
    const { rows } = await sql<{ data: { deliveryId: string }; state: string }>`select data, state from ${sql.table(`${schema[0].s}_boss.job`)} where name = 'delivery.run'`.execute(ctx.deps.db);
    return rows.filter((r) => r.data.deliveryId === deliveryId).map((r) => r.state === 'created' || r.state === 'retry');
  };

  /** One mail held after DATA, its first attempt handed over to a stand-by job (the routing budget is 200 ms). */
  async function heldMail(grace: StopGraceTimer, clock?: ManualClock): Promise<{ t: TestContext; smtp: SmtpPeer; trackingId: string; deliveryId: string }> {
    smtp = await startSmtpPeer({ holdData: ['held@example.com'] });
    t = await createTestContext(kind, { config: { smtpUrl: smtp.url, allowPrivateNetworks: true }, ...(clock ? { clock } : {}) });
    t.workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10, firstAttemptBudgetMs: 200, stopGraceTimer: grace });
    const [trackingId] = await sendEmails(t, 'stop', ['held@example.com'], 'held');
    await smtp.waitForHeld(1);
    const { id } = await delivery(t, trackingId);
    await eventually(async () => ((await waitingJobs(t!, id)).length === 1 ? true : undefined), 10_000, 'the stand-by job of the handed-over attempt');
    return { t, smtp, trackingId, deliveryId: id };
  }

  it('waits for a handed-over call the server answers during the stop, records it sent, and leaves nothing to send it again', async () => {
    const clock = new ManualClock();
    const grace = manualGrace();
    const { t, smtp, trackingId, deliveryId } = await heldMail(grace.timer, clock);
    expect(await delivery(t, trackingId)).toMatchObject({ status: 'pending', attempts: 0 });

    const stopping = t.workers!.stop();
    // What the ledger says the moment the stop completes (the process closes storage and exits next).
    const atStop = stopping.then(() => delivery(t, trackingId));
    // The stop waits on the call instead of closing the SMTP pool and storage under it.
    const first = await Promise.race([grace.waiting, stopping.then(() => 'stopped' as const)]);
    smtp.release();
    await stopping;
    t.workers = undefined;
    expect(await atStop).toMatchObject({ status: 'sent', attempts: 1 });
    expect(first).toBe('waiting');
    const attempts = await db(t).selectFrom('delivery_attempts').select(['attempt', 'outcome']).where('delivery_id', '=', deliveryId).execute();
    expect(attempts).toEqual([{ attempt: 1, outcome: 'success' }]);
    expect((await log(t, trackingId)).email_sent_at).toEqual(expect.any(String));
    expect(smtp.messages.map((m) => m.envelope.to[0])).toEqual(['held@example.com']);
    // Its stand-by job was cancelled (or, claimed already on PostgreSQL, completed) in the same record.
    expect(await waitingJobs(t, deliveryId)).toEqual([false]);

    // Restarted past the stand-by job's time: its run (made here by hand) finds the mail sent and sends nothing.
    clock.advance(HANDOVER_DELAY_MS + 60_000);
    t.workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10 });
    await t.workers.worker.runDelivery(deliveryId);
    expect(smtp.messages).toHaveLength(1);
    expect(smtp.held).toBe(1);
    expect(await delivery(t, trackingId)).toMatchObject({ status: 'sent', attempts: 1 });
  });

  it('a call that never answers holds the stop only until its grace ends, and stays with its stand-by job', async () => {
    const grace = manualGrace();
    const { t, smtp, trackingId, deliveryId } = await heldMail(grace.timer);

    const stopping = t.workers!.stop();
    const first = await Promise.race([grace.waiting, stopping.then(() => 'stopped' as const)]);
    expect(first).toBe('waiting');
    // The grace ends with the call still unanswered: the stop completes all the same.
    grace.end();
    await stopping;
    t.workers = undefined;

    expect(smtp.messages).toEqual([]);
    expect(await delivery(t, trackingId)).toMatchObject({ status: 'pending', attempts: 0 });
    // Left to its stand-by job, as after a crash.
    expect(await waitingJobs(t, deliveryId)).toEqual([true]);
  });
});

// A routing job waits for its first attempts only so long (firstAttemptBudgetMs): a provider that
// hangs gets its deliveries handed to delivery.run jobs that stand by, the routing job completes,
// and later sends are routed and delivered meanwhile. The hanging call is still recorded when it
// ends, and its stand-by job then follows it: cancelled once the mail is sent, moved to the
// retry's time when the mail was deferred; never a second call while the first is under way.
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import type { DeliveryTables } from '../../src/modules/delivery/delivery.tables.js';
import { HANDOVER_DELAY_MS } from '../../src/modules/sending/delivery-runs.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import { startWorkers } from '../../src/workers.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { sendEmails } from '../helpers/sends.js';
import { type SmtpPeer, type SmtpPeerOptions, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('the routing job\'s budget for first attempts (%s)', (kind) => {
  let t: TestContext | undefined;
  let smtp: SmtpPeer | undefined;
  afterEach(async () => {
    smtp?.release();
    await t?.close();
    await smtp?.close();
    t = undefined;
    smtp = undefined;
  });

  /** One routing job at a time, so that a routing job held by its mail holds every later send. */
  async function start(options: SmtpPeerOptions, clock?: ManualClock): Promise<{ t: TestContext; smtp: SmtpPeer }> {
    smtp = await startSmtpPeer(options);
    t = await createTestContext(kind, { config: { smtpUrl: smtp.url, allowPrivateNetworks: true }, ...(clock ? { clock } : {}) });
    t.workers = await startWorkers(t.deps, t.services, { retryBaseMs: 10, firstAttemptBudgetMs: 500, concurrency: 1 });
    return { t, smtp };
  }
  const db = (ctx: TestContext) => ctx.deps.db.withTables<SendingTables & DeliveryTables>();
  const delivery = async (ctx: TestContext, trackingId: string) => db(ctx).selectFrom('deliveries').select(['id', 'status', 'attempts']).where('tracking_id', '=', trackingId).executeTakeFirstOrThrow();
  /** delivery.run jobs, whatever their state: whose, their run time, whether they still wait and whether they completed. */
  const deliveryJobs = async (ctx: TestContext): Promise<{ deliveryId: string; runAt: number; waiting: boolean; completed: boolean }[]> => {
    if (kind === 'sqlite') {
      const { rows } = await sql<{ data: string; run_at: string; state: string }>`select data, run_at, state from queue_jobs where name = 'delivery.run'`.execute(ctx.deps.db);
      return rows.map((r) => ({ deliveryId: (JSON.parse(r.data) as { deliveryId: string }).deliveryId, runAt: Date.parse(r.run_at), waiting: r.state === 'waiting', completed: r.state === 'done' }));
    }
    const { rows: schema } = await sql<{ s: string }>`select current_schema() as s`.execute(ctx.deps.db);
    const { rows } = await sql<{ data: { deliveryId: string }; start_after: Date; state: string }>`select data, start_after, state from ${sql.table(`${schema[0].s}_boss.job`)} where name = 'delivery.run'`.execute(ctx.deps.db);
    return rows.map((r) => ({ deliveryId: r.data.deliveryId, runAt: r.start_after.getTime(), waiting: r.state === 'created' || r.state === 'retry', completed: r.state === 'completed' }));
  };
  const jobsOf = async (ctx: TestContext, deliveryId: string) => (await deliveryJobs(ctx)).filter((j) => j.deliveryId === deliveryId);

  it('hands a hanging mail over, routes and delivers later sends meanwhile, and cancels the stand-by job once the mail is sent', async () => {
    const { t, smtp } = await start({ holdData: ['slow@example.com'] });
    const [slow] = await sendEmails(t, 'budget', ['slow@example.com'], 'slow');
    await smtp.waitForHeld(1);
    const handedAt = Date.now();

    // Without the budget the one routing slot waits for the held mail, and this send with it.
    const [fast] = await sendEmails(t, 'budget', ['fast@example.com'], 'fast');
    await eventually(async () => ((await delivery(t, fast)).status === 'sent' ? true : undefined), 10_000, 'the later send delivered while the first mail hangs');
    expect(smtp.messages.map((m) => m.envelope.to[0])).toEqual(['fast@example.com']);

    // The held mail: not attempted yet as far as the ledger knows, and a stand-by job due well after the provider's timeouts.
    const held = await delivery(t, slow);
    expect(held).toMatchObject({ status: 'pending', attempts: 0 });
    const standBy = await jobsOf(t, held.id);
    expect(standBy.map((j) => j.waiting)).toEqual([true]);
    expect(standBy[0].runAt).toBeGreaterThanOrEqual(handedAt + HANDOVER_DELAY_MS - 60_000);
    // The later mail went out within the budget, or was handed over too and its job cancelled once it was sent.
    expect((await deliveryJobs(t)).filter((j) => j.waiting)).toHaveLength(1);

    smtp.release();
    await eventually(async () => ((await delivery(t, slow)).status === 'sent' ? true : undefined), 10_000, 'the held mail recorded once answered');
    expect(await delivery(t, slow)).toMatchObject({ status: 'sent', attempts: 1 });
    expect((await jobsOf(t, held.id)).map((j) => j.waiting)).toEqual([false]);
    expect((await deliveryJobs(t)).filter((j) => j.waiting)).toEqual([]);
    expect(smtp.messages.map((m) => m.envelope.to[0]).sort()).toEqual(['fast@example.com', 'slow@example.com']);
  });

  it('moves the stand-by job to the retry of a hanging mail that was then deferred, and retries in it, once', async () => {
    const { t, smtp } = await start({ holdData: ['later@example.com'], rejectData: 451, rejectDataTimes: 1 });
    const [later] = await sendEmails(t, 'budget', ['later@example.com'], 'later');
    await smtp.waitForHeld(1);
    // The routing job completed while the mail hangs (its stand-by job is written first).
    const { id } = await delivery(t, later);
    await eventually(async () => ((await jobsOf(t, id)).length === 1 ? true : undefined), 10_000, 'the stand-by job');
    // Answered 451 once released: the retry runs in the stand-by job, moved to the retry's time, not in a second job.
    smtp.options.holdData = [];
    smtp.release();
    await eventually(async () => ((await delivery(t, later)).status === 'sent' ? true : undefined), 10_000, 'the deferred mail sent on its retry');
    const attempts = await db(t).selectFrom('delivery_attempts').select(['attempt', 'outcome']).where('delivery_id', '=', id).orderBy('attempt').execute();
    expect(attempts).toEqual([
      { attempt: 1, outcome: 'retry' },
      { attempt: 2, outcome: 'success' },
    ]);
    expect(await deliveryJobs(t)).toHaveLength(1);
    expect(smtp.messages.filter((m) => m.envelope.to[0] === 'later@example.com')).toHaveLength(1);
  });

  it('a stand-by job that falls due while the call is still under way waits for its outcome instead of calling again', async () => {
    // The stand-by job falls due at once: on SQLite the clock is moved past it, pg-boss compares
    // with the server's time, which is months after this clock.
    const clock = new ManualClock();
    const { t, smtp } = await start({ holdData: ['held@example.com'] }, clock);
    const [trackingId] = await sendEmails(t, 'budget', ['held@example.com'], 'held');
    await smtp.waitForHeld(1);
    const { id } = await delivery(t, trackingId);
    await eventually(async () => ((await jobsOf(t, id)).length === 1 ? true : undefined), 10_000, 'the stand-by job');
    clock.advance(HANDOVER_DELAY_MS + 60_000);
    await eventually(async () => ((await jobsOf(t, id)).some((j) => !j.waiting) ? true : undefined), 10_000, 'the stand-by job claimed');

    smtp.release();
    await eventually(async () => ((await delivery(t, trackingId)).status === 'sent' ? true : undefined), 10_000, 'the held mail recorded');
    // It completes once the call it waited for is recorded; had it called the provider, the peer would hold that call.
    await eventually(async () => ((await jobsOf(t, id)).every((j) => j.completed) ? true : undefined), 10_000, 'the stand-by job completed');
    // One call: a second would have been held by the peer too.
    expect(smtp.held).toBe(1);
    expect(smtp.messages.map((m) => m.envelope.to[0])).toEqual(['held@example.com']);
    const attempts = await db(t).selectFrom('delivery_attempts').select(['attempt', 'outcome']).where('delivery_id', '=', id).execute();
    expect(attempts).toEqual([{ attempt: 1, outcome: 'success' }]);
  });
});

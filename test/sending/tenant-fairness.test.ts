// One tenant's slow templates must not hold another tenant's message: a routing batch gives each
// account a planning budget (PLANNING_BUDGET_MS); the messages of an account past it are deferred
// (their jobs go to the back of the queue, no attempt counted), and while one message of such a
// slow account is being planned the other batches defer its messages at once, so another
// account's message in the batch, or behind it in the queue, is planned after a few renders, not
// after the backlog (docs/fairness.md).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DeliveryTables } from '../../src/modules/delivery/delivery.tables.js';
import { DeliveryWorker } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import { PLANNING_BUDGET_MS } from '../../src/modules/sending/planning-budget.js';
import type { SendingTables } from '../../src/modules/sending/sending.tables.js';
import type { Channel } from '../../src/http/schemas.js';
import { RenderPool } from '../../src/rendering/render-pool.js';
import type { RenderContext } from '../../src/rendering/liquid.js';
import type { CreatedAccount } from '../../src/modules/accounts/bootstrap.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/** Marks the html of the slow tenant's template; its renders take a render limit's worth of the clock. */
const SLOW = 'slow-report';

/**
 * Real render threads, with the slow tenant's renders taking PLANNING_BUDGET_MS on the test's
 * clock (as a template looping up to the render limit takes it on the real one): no test waits
 * for time to pass. Records whose render was asked for, in order. hold(): the slow tenant's
 * renders after its first wait until release(), as renders still under way.
 */
class ClockedRenders extends RenderPool {
  readonly order: ('A' | 'B')[] = [];
  /** The slow tenant's renders waiting for release(). */
  held = 0;
  private gate: Promise<void> | null = null;
  private open: () => void = () => {};
  constructor(private readonly clock: ManualClock) {
    super({ size: 1 });
  }
  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }
  release(): void {
    this.gate = null;
    this.open();
  }
  override async render<T extends object>(channel: Channel, content: T, context: RenderContext, options?: Parameters<RenderPool['render']>[3]): Promise<T> {
    const slow = JSON.stringify(content).includes(SLOW);
    this.order.push(slow ? 'A' : 'B');
    if (slow && this.gate && this.order.filter((who) => who === 'A').length > 1) {
      this.held++;
      await this.gate;
    }
    const rendered = await super.render(channel, content, context, options);
    if (slow) this.clock.advance(PLANNING_BUDGET_MS);
    return rendered;
  }
}

describe.each(STORAGE_KINDS)('tenant fairness of routing (%s)', (kind) => {
  const SLOW_SENDS = 40;
  let t: TestContext;
  let smtp: SmtpPeer;
  let clock: ManualClock;
  let tenantB: CreatedAccount;
  beforeEach(async () => {
    smtp = await startSmtpPeer();
    clock = new ManualClock();
    // No workers: the test starts the sending jobs alone, with its own render pool.
    t = await createTestContext(kind, { clock, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
    tenantB = await t.newAccount('Tenant B');
  });
  afterEach(async () => {
    await t.close();
    await smtp.close();
  });

  async function send(auth: { authorization: string }, user: string, html: string): Promise<string> {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: auth, payload: { type: 'report', to: { id: user, email: `${user}@example.com` }, email: { subject: 'Report', html } } });
    expect(res.statusCode).toBe(200);
    return res.json<{ trackingId: string }>().trackingId;
  }

  /** Tenant A's backlog of slow sends, then tenant B's one send: all due when the worker starts. */
  async function sendBacklog(): Promise<string> {
    for (let i = 0; i < SLOW_SENDS; i++) await send(t.auth, `a${i}`, `<p>{{ "${SLOW}" }} ${i}</p>`);
    return send({ authorization: `Bearer ${tenantB.apiKey}` }, 'b0', '<p>{{ "quick" }}</p>');
  }

  /** Runs the sending jobs with `renders` while `during` runs, then until every mail is out; stops them. */
  async function work(renders: ClockedRenders, during: () => Promise<void> = async () => {}): Promise<void> {
    const { executors, close } = buildExecutors(t.deps, t.services, renders);
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services, { retryBaseMs: 10 }, renders);
    worker.register();
    await t.deps.queue.start();
    try {
      await during();
      await smtp.waitFor(SLOW_SENDS + 1);
    } finally {
      await t.deps.queue.stop();
      await worker.stopCalls();
      await close();
      await renders.close();
    }
  }

  /** Every mail sent once, each delivery with one attempt: nothing lost or doubled, the deferrals spent none. */
  async function expectEveryMailOnce(trackingB: string): Promise<void> {
    expect(smtp.messages.map((m) => m.envelope.to[0]).sort()).toEqual([...Array.from({ length: SLOW_SENDS }, (_, i) => `a${i}@example.com`), 'b0@example.com'].sort());
    const db = t.deps.db.withTables<SendingTables & DeliveryTables>();
    const deliveries = await db.selectFrom('deliveries').select(['tracking_id', 'status', 'attempts']).execute();
    expect(deliveries).toHaveLength(SLOW_SENDS + 1);
    expect(deliveries.every((d) => d.status === 'sent' && d.attempts === 1)).toBe(true);
    expect(deliveries.some((d) => d.tracking_id === trackingB)).toBe(true);
  }

  it("plans another tenant's message after a few of the slow tenant's renders, not after its backlog", async () => {
    const trackingB = await sendBacklog();
    const renders = new ClockedRenders(clock);
    await work(renders);
    // Without the budget B waited for every batch of A's messages claimed before it, each planned
    // through: B's was the 41st render on both engines. With it each batch plans one of A's and
    // defers the rest behind B: B's came 5th on SQLite, 9th to 11th on PostgreSQL (4 jobs a
    // batch: more claims before one reaches B). Renders here end at once in real time, so the
    // batches seldom find one of A's under way (the next test holds them).
    const before = renders.order.indexOf('B');
    expect(before).toBeGreaterThanOrEqual(0);
    expect(before).toBeLessThanOrEqual(SLOW_SENDS / 3);
    await expectEveryMailOnce(trackingB);
  });

  it("delivers another tenant's message while the slow tenant's renders are under way", async () => {
    const trackingB = await sendBacklog();
    const renders = new ClockedRenders(clock);
    // A's first render takes its budget; the next ones of A do not end until B's mail is out.
    renders.hold();
    await work(renders, async () => {
      await eventually(() => smtp.messages.some((m) => m.envelope.to[0] === 'b0@example.com'), 10_000, "tenant B's mail while A's renders are held");
      expect(renders.held).toBeGreaterThanOrEqual(1);
      // A's first mail at most: the rest of A's backlog waits behind B.
      expect(smtp.messages.filter((m) => m.envelope.to[0].startsWith('a')).length).toBeLessThanOrEqual(1);
      renders.release();
    });
    await expectEveryMailOnce(trackingB);
  });
});

// A run that may have made a provider call without recording it (its worker died mid-call) is told
// to the executor through earlierAttempts(): a routing job's re-run that finds a delivery its
// earlier run committed still unattempted, and a delivery.run job run more often than the
// delivery's recorded attempts imply. A first attempt, a normal retry (RetryJobError runs the
// same job again) and a deferred run (not counted) are not reported.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryError } from '../../src/channels/types.js';
import { DeferJobError, type JobContext, type JobToEnqueue, RetryJobError } from '../../src/queue/port.js';
import { DeliveryRuns } from '../../src/modules/sending/delivery-runs.js';
import { DELIVER_JOB, DeliveryWorker, MAX_DELIVERY_ATTEMPTS } from '../../src/modules/sending/delivery.worker.js';
import { buildExecutors } from '../../src/modules/sending/executors/index.js';
import type { DeliverInput, Executors } from '../../src/modules/sending/executors/types.js';
import { MessagesRepository } from '../../src/modules/sending/messages.repository.js';
import type { AttemptRow, SendingTables } from '../../src/modules/sending/sending.tables.js';
import { type DeliveryJobData, UNRECORDED_RUN } from '../../src/modules/sending/unrecorded-runs.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type TwilioPeer, startTwilioPeer, twilioPeerConfig } from '../helpers/twilio-peer.js';
import { eventually } from '../helpers/wait.js';

const FROM = '+14155550100';

describe.each(STORAGE_KINDS)('runs that may have left a provider call unrecorded (%s)', (kind) => {
  let t: TestContext;
  let peer: TwilioPeer;
  let number = 0;
  /** What toldRuns built executors for: closed at the end. */
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    // The peer is never called: the SMS executor's deliver is replaced; routing plans SMS for it.
    peer = await startTwilioPeer();
    t = await createTestContext(kind, { config: twilioPeerConfig(peer, FROM) });
  });
  afterAll(async () => {
    for (const close of closers) await close();
    await t.close();
    await peer.close();
  });

  /** A pending SMS delivery (attempts 0), routed as the queue would, and its message. */
  const smsDelivery = async () => {
    const to = `+1415555${String(3000 + ++number)}`;
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'otp', to: { id: `user-${to}`, number: to }, sms: { message: 'Your code is 4711' } } });
    expect(res.statusCode, res.body).toBe(200);
    const trackingId = res.json<{ trackingId: string }>().trackingId;
    const { executors, close } = buildExecutors(t.deps, t.services);
    const worker = new DeliveryWorker(t.deps, t.deps.queue, executors, t.services);
    try {
      if (kind === 'sqlite') {
        for (const { seq } of await t.deps.db.withTables<SendingTables>().selectFrom('send_intake').select('seq').orderBy('seq').execute()) await worker.ingestSends(seq);
      } else {
        await worker.processMessage(trackingId);
      }
    } finally {
      await worker.close();
      await close();
    }
    const repo = new MessagesRepository(t.deps.db);
    const [delivery] = (await repo.deliveriesOf([trackingId])).filter((d) => d.channel === 'sms');
    const [message] = await repo.findMessagesForWork([trackingId]);
    expect(delivery).toMatchObject({ status: 'pending', attempts: 0 });
    return { delivery, message };
  };
  const reload = async (deliveryId: string) => (await new MessagesRepository(t.deps.db).findDeliveries([deliveryId]))[0];
  const recordedAttempts = (deliveryId: string) => new MessagesRepository(t.deps.db).attemptsOfDelivery(deliveryId);

  /**
   * DeliveryRuns whose SMS executor records what earlierAttempts() tells each call, then answers
   * as `answer` says; the jobs it enqueues (retries, hand-overs) are kept, not run (unless `real`:
   * they go to the context's queue).
   */
  const toldRuns = (answer: (input: DeliverInput) => Promise<void> = async () => {}, real = false) => {
    const told: AttemptRow[][] = [];
    const enqueued: JobToEnqueue[] = [];
    const { executors, close } = buildExecutors(t.deps, t.services);
    closers.push(close);
    const telling: Executors = {
      SMS: {
        ...executors.SMS!,
        async deliver(input) {
          told.push(await input.earlierAttempts!());
          await answer(input);
          return { result: { providerMessageId: `SM${input.delivery.id.replace(/-/g, '')}`, response: 'queued' } };
        },
      },
    };
    const queue = {
      enqueueMany: async (_tx: unknown, jobs: JobToEnqueue[]) => {
        enqueued.push(...jobs);
        return jobs.map((_, i) => `job-${enqueued.length - jobs.length + i}`);
      },
      reschedule: async () => true,
      cancel: async () => true,
    };
    return { runs: new DeliveryRuns(t.deps, telling, t.services.users, { retryBaseMs: 10 }, real ? t.deps.queue : queue), told, enqueued };
  };
  const timedOut = () => Promise.reject(new DeliveryError('TIMEOUT', 'timed out', { retryable: true }));
  const job = (attempt: number): JobContext => ({ id: 'job', name: DELIVER_JOB, attempt, maxAttempts: MAX_DELIVERY_ATTEMPTS + 2 });
  const unrecordedOf = (attempts: AttemptRow[]) => attempts.filter((a) => a.provider_code === UNRECORDED_RUN);

  it("a routing job's first attempt is told of none; its re-run's, for a delivery its earlier run left unattempted, of one since the delivery's creation", async () => {
    const { runs, told } = toldRuns();
    const fresh = await smsDelivery();
    const resumed = await smsDelivery();
    expect(await runs.runFirst([fresh])).toEqual([undefined]);
    expect(await runs.runFirst([{ ...resumed, resumed: true }])).toEqual([undefined]);

    expect(told[0]).toEqual([]);
    expect(told[1]).toEqual([expect.objectContaining({ outcome: 'retry', provider_code: UNRECORDED_RUN, started_at: resumed.delivery.created_at })]);
    // The reported run is no row: the delivery records the one attempt made.
    expect((await recordedAttempts(resumed.delivery.id)).map((a) => a.outcome)).toEqual(['success']);
  });

  it('a retry job counts its runs: normal retries are not reported, a run that left nothing recorded is, from the last recorded attempt', async () => {
    const { runs, told, enqueued } = toldRuns(timedOut);
    const { delivery, message } = await smsDelivery();
    await runs.runFirst([{ delivery, message }]);
    expect(enqueued).toEqual([expect.objectContaining({ name: DELIVER_JOB, data: { deliveryId: delivery.id, priorAttempts: 1 } })]);
    const data = enqueued[0].data as DeliveryJobData;

    // Runs 1 and 2 of the job: each records its attempt and asks for the next (the same job again).
    for (const attempt of [1, 2]) {
      const [result] = await runs.run([{ data, job: job(attempt) }]);
      expect(result).toBeInstanceOf(RetryJobError);
    }
    expect((await reload(delivery.id)).attempts).toBe(3);
    // Run 3 died mid-call (nothing recorded); run 4 is told of it.
    await runs.run([{ data, job: job(4) }]);

    expect(told.map((attempts) => attempts.length)).toEqual([0, 1, 2, 4]);
    expect(told.slice(0, 3).flatMap(unrecordedOf)).toEqual([]);
    const recorded = await recordedAttempts(delivery.id);
    expect(told[3].slice(0, 3)).toEqual(recorded.slice(0, 3));
    expect(unrecordedOf(told[3])).toEqual([expect.objectContaining({ outcome: 'retry', started_at: recorded[2].started_at })]);
  });

  it("a hand-over's stand-by job, run while the first attempt is still unrecorded (its process died), is told of it", async () => {
    const { delivery, message } = await smsDelivery();
    let answer!: () => void;
    const hanging = toldRuns(() => new Promise<void>((resolve) => (answer = resolve)));
    // The routing budget is spent at once: the call is handed over, still under way.
    const [handed] = await hanging.runs.runFirst([{ delivery, message }], Promise.resolve());
    expect(handed).toBeUndefined();
    expect(hanging.enqueued[0].data).toEqual({ deliveryId: delivery.id, priorAttempts: 1 });

    // Another process runs the stand-by job: the first attempt is not recorded.
    const other = toldRuns();
    expect(await other.runs.run([{ data: hanging.enqueued[0].data as DeliveryJobData, job: job(1) }])).toEqual([undefined]);
    expect(other.told[0]).toEqual([expect.objectContaining({ provider_code: UNRECORDED_RUN, started_at: delivery.created_at })]);
    answer();
    await hanging.runs.stop();
  });

  it('through the queue: a deferred run and a normal retry are not reported', async () => {
    const { delivery, message } = await smsDelivery();
    // The first attempt times out; its retry job goes to the real queue.
    await toldRuns(timedOut, true).runs.runFirst([{ delivery, message }]);
    expect((await reload(delivery.id)).attempts).toBe(1);

    let calls = 0;
    const { runs, told } = toldRuns(() => (++calls === 1 ? timedOut() : Promise.resolve()));
    const seen: number[] = [];
    t.deps.queue.workBatch<DeliveryJobData>(
      DELIVER_JOB,
      async (items) => {
        seen.push(...items.map((i) => i.job.attempt));
        // Its first run gives way (as a routing job over its planning budget does): not counted.
        if (seen.length === 1) return items.map(() => new DeferJobError('not now'));
        return runs.run(items);
      },
      { batchSize: 4 },
    );
    await t.deps.queue.start();
    try {
      await eventually(async () => (await reload(delivery.id)).status === 'sent', 10_000, 'the retry job sent it');
    } finally {
      await t.deps.queue.stop();
    }
    // Deferred (1, not counted), then run 1 (a retry), then run 2.
    expect(seen).toEqual([1, 1, 2]);
    expect(told.map((attempts) => attempts.map((a) => a.provider_code))).toEqual([['TIMEOUT'], ['TIMEOUT', 'TIMEOUT']]);
  });
});

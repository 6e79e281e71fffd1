// Delivery you can see (issue 14, item 5): a warning line per retry and per final failure, the
// attempts in the log record, and the delivery and queue metrics, after real sends to a real
// SMTP server on loopback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { captureLogs } from '../helpers/log-capture.js';
import { scrapeMetrics } from '../helpers/metrics.js';
import { sendEmails } from '../helpers/sends.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

type Log = Record<string, unknown> & { email_attempts?: Record<string, unknown>[] };

const SMTP_PASSWORD = 'smtp-pass-never-logged';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe.each(STORAGE_KINDS)('delivery you can see (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let lines: Record<string, unknown>[];

  beforeAll(async () => {
    smtp = await startSmtpPeer({ auth: { user: 'mailer', pass: SMTP_PASSWORD } });
    const capture = captureLogs('warn');
    lines = capture.lines;
    t = await createTestContext(kind, { workers: true, logger: capture.logger, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
  });

  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json<{ logs: Log[] }>().logs[0];
  const settled = (trackingId: string) => eventually(async () => {
    const record = await log(trackingId);
    return record?.email_sent_at || record?.email_failed_at ? record : undefined;
  }, 20_000, `the email of ${trackingId} to settle`);
  const linesOf = (trackingId: string, msg: string) => lines.filter((l) => l.trackingId === trackingId && l.msg === msg);
  const deliveries = (m: Awaited<ReturnType<typeof scrapeMetrics>>, outcome: string, channel = 'email') => m.value('clarion_deliveries_total', { channel, outcome }) ?? 0;
  const latencyCount = (m: Awaited<ReturnType<typeof scrapeMetrics>>) => m.value('clarion_provider_latency_seconds_count', { channel: 'email' }) ?? 0;

  it('a server that answers 451 once, then accepts: one warning line for the retry, both attempts in the log, the counters moved', async () => {
    smtp.options.rejectData = 451;
    smtp.options.rejectDataTimes = 1;
    const before = await scrapeMetrics(t.app);
    const [trackingId] = await sendEmails(t, 'visible', ['retry@example.com']);
    const record = await settled(trackingId);

    expect(record.email_sent_at).toBeDefined();
    expect(smtp.messages.map((m) => m.envelope.to[0])).toEqual(['retry@example.com']);
    const [first, second] = record.email_attempts ?? [];
    expect(record.email_attempts).toHaveLength(2);
    expect(first).toMatchObject({ attempt: 1, outcome: 'retry', provider_code: '451 4.3.0', error: expect.stringContaining('4.3.0 Temporary failure') });
    expect(second).toMatchObject({ attempt: 2, outcome: 'success', response: expect.stringMatching(/^250 /) });
    expect(second).not.toHaveProperty('error');
    for (const a of [first, second]) {
      expect(a.started_at).toMatch(ISO);
      expect(a.duration_ms).toEqual(expect.any(Number));
    }
    expect(Date.parse(second.started_at as string)).toBeGreaterThanOrEqual(Date.parse(first.started_at as string));

    const [retry, ...more] = linesOf(trackingId, 'delivery attempt failed; retrying');
    expect(more).toHaveLength(0);
    expect(retry).toMatchObject({ level: 40, channel: 'email', attempt: 1, providerCode: '451 4.3.0', error: expect.stringContaining('deferred'), deliveryId: expect.any(String) });
    // The next attempt's time, at or after the failed attempt began (the backoff may be 0 ms).
    expect(retry.nextAttemptAt).toMatch(ISO);
    expect(Date.parse(retry.nextAttemptAt as string)).toBeGreaterThanOrEqual(Date.parse(first.started_at as string));
    expect(linesOf(trackingId, 'delivery failed')).toHaveLength(0);

    const after = await scrapeMetrics(t.app);
    expect(deliveries(after, 'retried') - deliveries(before, 'retried')).toBe(1);
    expect(deliveries(after, 'sent') - deliveries(before, 'sent')).toBe(1);
    expect(deliveries(after, 'failed') - deliveries(before, 'failed')).toBe(0);
    expect(latencyCount(after) - latencyCount(before)).toBe(2);
    // The +Inf bucket holds every call; the histogram's sum is the calls' time in seconds.
    expect(after.value('clarion_provider_latency_seconds_bucket', { channel: 'email', le: '+Inf' })).toBe(latencyCount(after));
    expect(after.value('clarion_provider_latency_seconds_sum', { channel: 'email' })).toBeGreaterThanOrEqual(0);
  });

  it('a server that refuses for good (554): one "delivery failed" line with the code, the failed attempt in the log', async () => {
    smtp.options.rejectData = 554;
    smtp.options.rejectDataTimes = undefined;
    const before = await scrapeMetrics(t.app);
    const [trackingId] = await sendEmails(t, 'visible', ['refused@example.com'], 'refused');
    const record = await settled(trackingId);

    expect(record).toMatchObject({ email_failed_code: 'SMTP_REJECTED', email_failed_diagnostic_code: '554 5.7.1' });
    expect(record.email_attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: 'failed', provider_code: '554 5.7.1', error: expect.stringContaining('spam') })]);
    const failed = linesOf(trackingId, 'delivery failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: 40, channel: 'email', code: 'SMTP_REJECTED', attempt: 1, providerCode: '554 5.7.1', error: expect.stringContaining('rejected the message') });
    expect(linesOf(trackingId, 'delivery attempt failed; retrying')).toHaveLength(0);

    const after = await scrapeMetrics(t.app);
    expect(deliveries(after, 'failed') - deliveries(before, 'failed')).toBe(1);
    expect(deliveries(after, 'retried') - deliveries(before, 'retried')).toBe(0);
  });

  it('a failure without a provider call (a template that cannot render) is logged with its code and reason too', async () => {
    smtp.options.rejectData = undefined;
    const res = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: t.auth,
      payload: { type: 'visible', to: { id: 'unrenderable', email: 'x@example.com' }, email: { subject: 'Hi', html: '{{ name | no_such_filter }}' } },
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(200);
    expect(res.statusCode).toBeLessThan(300);
    const { trackingId } = res.json<{ trackingId: string }>();
    const [line] = await eventually(() => {
      const found = linesOf(trackingId, 'delivery failed');
      return found.length > 0 ? found : undefined;
    }, 20_000, 'the failure line');
    expect(line).toMatchObject({ channel: 'email', code: 'TEMPLATE_RENDER_FAILED', error: expect.stringContaining('no_such_filter') });
    expect(line).not.toHaveProperty('attempt');
    expect((await log(trackingId)).email_attempts).toBeUndefined();
  });

  it('counts in-app deliveries and the channels routing skipped', async () => {
    const before = await scrapeMetrics(t.app);
    const res = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: t.auth,
      // No email address: the email channel is skipped, the in-app one delivered.
      payload: { type: 'visible', to: { id: 'no-address' }, email: { subject: 'Hi', html: '<p>x</p>' }, inapp: { title: 'Hello' } },
    });
    const { trackingId } = res.json<{ trackingId: string }>();
    await eventually(async () => (await log(trackingId))?.inapp_delivered_at, 20_000, 'the in-app delivery');
    const after = await scrapeMetrics(t.app);
    expect(deliveries(after, 'delivered', 'inapp') - deliveries(before, 'delivered', 'inapp')).toBe(1);
    expect(deliveries(after, 'skipped', 'email') - deliveries(before, 'skipped', 'email')).toBe(1);
    expect((after.value('clarion_provider_latency_seconds_count', { channel: 'inapp' }) ?? 0) - (before.value('clarion_provider_latency_seconds_count', { channel: 'inapp' }) ?? 0)).toBe(1);
  });

  it('logs no secret and no message content', () => {
    const all = JSON.stringify(lines);
    expect(lines.length).toBeGreaterThan(0);
    expect(all).not.toContain(SMTP_PASSWORD);
    expect(all).not.toContain(t.account.apiKey);
    expect(all).not.toContain('<p>x</p>');
  });
});

describe.each(STORAGE_KINDS)('queue gauges (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    // No workers: jobs stay where they are while the test looks.
    t = await createTestContext(kind);
  });
  afterAll(() => t?.close());

  it('count due and delayed jobs per job name and the age of the oldest due one, read from the database', async () => {
    const now = Date.now();
    const due = await t.deps.queue.enqueue(t.deps.db, 'visibility.probe', { n: 1 }, { runAt: new Date(now - 90_000) });
    await t.deps.queue.enqueue(t.deps.db, 'visibility.probe', { n: 2 }, { runAt: new Date(now + 3_600_000) });
    const scheduled = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'later', to: { id: 'u' }, inapp: { title: 'x' }, schedule: new Date(now + 86_400_000).toISOString() } });
    expect(scheduled.statusCode).toBeLessThan(300);

    const m = await scrapeMetrics(t.app);
    expect(m.value('clarion_queue_jobs', { queue: 'visibility.probe', state: 'due' })).toBe(1);
    expect(m.value('clarion_queue_jobs', { queue: 'visibility.probe', state: 'delayed' })).toBe(1);
    const age = m.value('clarion_queue_oldest_due_seconds', { queue: 'visibility.probe' })!;
    expect(age).toBeGreaterThanOrEqual(90);
    expect(age).toBeLessThan(600);
    expect(m.value('clarion_queue_jobs', { queue: 'message.process', state: 'delayed' })).toBe(1);
    expect(m.value('clarion_queue_oldest_due_seconds', { queue: 'message.process' })).toBe(0);

    // A name whose jobs are all done is listed at 0 from the first scrape, on both engines.
    const finished = await t.deps.queue.enqueue(t.deps.db, 'visibility.finished', { n: 3 });
    expect(await t.deps.queue.cancel(t.deps.db, finished)).toBe(true);
    const listed = await scrapeMetrics(t.app);
    expect(listed.value('clarion_queue_jobs', { queue: 'visibility.finished', state: 'due' })).toBe(0);
    expect(listed.value('clarion_queue_oldest_due_seconds', { queue: 'visibility.finished' })).toBe(0);

    // Drained: the series stay, at 0.
    expect(await t.deps.queue.cancel(t.deps.db, due)).toBe(true);
    const drained = await scrapeMetrics(t.app);
    expect(drained.value('clarion_queue_jobs', { queue: 'visibility.probe', state: 'due' })).toBe(0);
    expect(drained.value('clarion_queue_oldest_due_seconds', { queue: 'visibility.probe' })).toBe(0);
  });
});

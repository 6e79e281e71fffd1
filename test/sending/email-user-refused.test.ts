// The user's own address refused at RCPT TO while a cc or bcc is accepted: the server takes the
// message for the copies, yet the delivery is the user's and must not read as sent. A 5xx fails
// it as a bounce (suppression included); a 4xx is retried, the whole message again. Driven
// through POST /send, the delivery workers and a loopback SMTP sink that refuses one RCPT.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

interface EventPayload {
  eventType: string;
  trackingId: string;
  userId: string;
  failureCode?: string;
  details: Record<string, unknown>;
}

describe.each(STORAGE_KINDS)('email: the user refused at RCPT while a cc or bcc is accepted (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let receiver: WebhookReceiver;
  /** Answers 451 to greylist-main@ while above zero (a greylisting server: later attempts pass). */
  let greylisting = 0;

  const send = async (userId: string, email: string, subject: string, options: object) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: t.auth,
      payload: { type: 'refusals', to: { id: userId, email }, email: { subject, html: '<p>hi</p>' }, options: { email: options } },
    });
    expect(res.statusCode).toBe(200);
    return res.json<{ trackingId: string }>().trackingId;
  };
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0] as Record<string, unknown>;
  const user = async (userId: string) => (await t.app.inject({ method: 'GET', url: `/users/${userId}`, headers: t.auth })).json();
  const attempts = async (trackingId: string) =>
    (
      await sql<{ outcome: string; provider_code: string | null; detail: string | null }>`
        select a.outcome, a.provider_code, a.detail from delivery_attempts a join deliveries d on d.id = a.delivery_id
        where d.tracking_id = ${trackingId} and d.channel = 'email' order by a.attempt`.execute(t.deps.db)
    ).rows;
  const events = (trackingId: string) => receiver.requests.map((r) => JSON.parse(r.body) as EventPayload).filter((p) => p.trackingId === trackingId);
  /** The email's one settling event (a delivery settles once: delivered or failed, never both). */
  const settledEvent = async (trackingId: string) => {
    const [event] = await eventually(() => events(trackingId).length > 0 && events(trackingId), 15_000, `the webhook event of ${trackingId}`);
    return event;
  };
  const received = (subject: string) => smtp.messages.filter((m) => m.parsed.subject === subject);

  beforeAll(async () => {
    smtp = await startSmtpPeer({ reject: { 'reject-main@example.com': 550, 'defer-main@example.com': 451 } });
    // Read at every RCPT TO (smtp-peer looks the address up then): 451 while greylisting lasts.
    Object.defineProperty(smtp.options.reject, 'greylist-main@example.com', { enumerable: true, get: () => (greylisting-- > 0 ? 451 : undefined) });
    receiver = await new WebhookReceiver().start();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true, webhookPollMs: 20 } });
    t.services.webhooks.worker.start();
    const hook = await t.app.inject({ method: 'POST', url: '/webhooks', headers: t.auth, payload: { webhook: receiver.url, events: ['EMAIL_DELIVERED', 'EMAIL_FAILED'] } });
    expect(hook.statusCode).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
    await receiver?.close();
  });

  it.each([
    ['cc', { ccAddresses: ['okcc@example.com'] }, 'okcc@example.com'],
    ['bcc', { bccAddresses: ['okbcc@example.com'] }, 'okbcc@example.com'],
  ])('550 for the user, its %s accepted: EMAIL_FAILED SMTP_RECIPIENT_REJECTED and the user suppressed, as when all are refused', async (copy, options, copyAddress) => {
    const userId = `refused-${copy}`;
    const subject = `refused with a ${copy}`;
    const trackingId = await send(userId, 'reject-main@example.com', subject, options);

    const event = await settledEvent(trackingId);
    expect(event).toMatchObject({
      eventType: 'EMAIL_FAILED',
      userId,
      failureCode: 'SMTP_RECIPIENT_REJECTED',
      details: { email_failed_recipient: 'reject-main@example.com', email_failed_diagnostic_code: '550 5.1.1' },
    });

    const record = await log(trackingId);
    expect(record).toMatchObject({
      email_failed_code: 'SMTP_RECIPIENT_REJECTED',
      email_failed_recipient: 'reject-main@example.com',
      email_failed_diagnostic_code: '550 5.1.1',
    });
    expect(record.email_sent_at).toBeUndefined();
    // The copy got it: the failure says so and how many, not who (the request in the log names
    // them; the EMAIL_FAILED webhook, which carries the failure text, keeps a bcc blind).
    expect(record.email_failed_internal).toMatch(/^The server rejected reject-main@example\.com: 550 5\.1\.1 .*; it accepted the message for 1 other recipient \(cc\/bcc\)$/);
    expect(event.details.reason).toBe(record.email_failed_internal);
    expect(JSON.stringify(event)).not.toContain(copyAddress);
    expect((await attempts(trackingId)).map((a) => a.outcome)).toEqual(['failed']);
    expect(received(subject).map((m) => m.envelope.to)).toEqual([[copyAddress]]);

    const suppressed = await eventually(async () => {
      const u = await user(userId);
      return u.emailSuppressionStatus ? u.emailSuppressionStatus : undefined;
    });
    expect(suppressed).toMatchObject({ reason: 'Bounce', details: { recipient: 'reject-main@example.com', diagnosticCode: '550 5.1.1', trackingId } });
  });

  it('451 for the user, its cc accepted: retried (the cc gets the same message again), delivered once the user is accepted', async () => {
    greylisting = 1;
    const subject = 'greylisted with a cc';
    const trackingId = await send('greylisted', 'greylist-main@example.com', subject, { ccAddresses: ['okcc@example.com'] });

    const event = await settledEvent(trackingId);
    expect(event).toMatchObject({ eventType: 'EMAIL_DELIVERED', userId: 'greylisted' });
    const tried = await attempts(trackingId);
    expect(tried.map((a) => [a.outcome, a.provider_code])).toEqual([
      ['retry', '451 4.3.0'],
      ['success', null],
    ]);
    expect(tried[0].detail).toMatch(/^The server deferred greylist-main@example\.com: 451 4\.3\.0 .*; it accepted the message for 1 other recipient \(cc\/bcc\); a retry sends it to them again$/);

    const record = await log(trackingId);
    expect(record.email_sent_at).toBeTruthy();
    expect(record.email_failed_code).toBeUndefined();
    // At least once: the first attempt reached the cc, the retry both; one Message-ID throughout.
    const mails = received(subject);
    expect(mails.map((m) => m.envelope.to.sort())).toEqual([['okcc@example.com'], ['greylist-main@example.com', 'okcc@example.com']]);
    expect(new Set(mails.map((m) => m.parsed.messageId))).toEqual(new Set([record.email_sent_message_id]));
    expect((await user('greylisted')).emailSuppressionStatus).toBeUndefined();
  });

  it('4xx for the user on every attempt, its cc accepted: EMAIL_FAILED SMTP_RECIPIENT_DEFERRED once the retries run out, not suppressed', async () => {
    const subject = 'deferred with a cc';
    const trackingId = await send('deferred', 'defer-main@example.com', subject, { ccAddresses: ['okcc@example.com'] });

    const event = await settledEvent(trackingId);
    expect(event).toMatchObject({
      eventType: 'EMAIL_FAILED',
      failureCode: 'SMTP_RECIPIENT_DEFERRED',
      details: { email_failed_recipient: 'defer-main@example.com', email_failed_diagnostic_code: '451 4.3.0' },
    });
    expect((await attempts(trackingId)).map((a) => a.outcome)).toEqual(['retry', 'retry', 'retry', 'retry', 'retry', 'failed']);
    const record = await log(trackingId);
    expect(record).toMatchObject({ email_failed_code: 'SMTP_RECIPIENT_DEFERRED', email_failed_recipient: 'defer-main@example.com' });
    expect(record.email_sent_at).toBeUndefined();
    // Each attempt reached the cc (documented: at least once, the same Message-ID).
    expect(received(subject).map((m) => m.envelope.to)).toEqual(Array.from({ length: 6 }, () => ['okcc@example.com']));
    expect((await user('deferred')).emailSuppressionStatus).toBeUndefined();
  });

  it('the user accepted and its cc refused: delivered, as before (a cc is not the user; nothing is suppressed)', async () => {
    const subject = 'cc refused';
    const trackingId = await send('cc-refused', 'fine@example.com', subject, { ccAddresses: ['reject-main@example.com'] });
    expect(await settledEvent(trackingId)).toMatchObject({ eventType: 'EMAIL_DELIVERED', userId: 'cc-refused' });
    expect(received(subject).map((m) => m.envelope.to)).toEqual([['fine@example.com']]);
    expect((await user('cc-refused')).emailSuppressionStatus).toBeUndefined();
  });
});

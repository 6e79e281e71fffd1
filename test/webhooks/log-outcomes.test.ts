// What the customer's endpoint answered, in the log of the event's message (GET /logs): a
// settled delivery (a 2xx, or a failure with no retry left) sets `*_webhook_res` and, for
// inbound events, `*_webhook_delivered`; a failure that will be retried sets nothing yet; with
// several endpoints the last settled answer is kept; events of no message set nothing. Driven
// through a loopback receiver under a manual clock (the retry schedule's own delays).
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { NewWebhookEvent } from '../../src/modules/webhooks/outbox.js';
import { RETRY_DELAYS_MS } from '../../src/modules/webhooks/schedule.js';
import { webhookRes } from '../../src/modules/webhooks/webhook-log-fields.js';
import type { WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import type { TestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { manualClockWebhooks, transition } from './webhook-fixtures.js';

describe('webhookRes', () => {
  it('is the status and the body folded and cut, or the reason there was no answer', () => {
    const at = { headers: {}, durationMs: 5 };
    expect(webhookRes({ ...at, statusCode: 200, body: '{"received": true}\n' })).toBe('HTTP 200: {"received": true}');
    expect(webhookRes({ ...at, statusCode: 204, body: '' })).toBe('HTTP 204');
    expect(webhookRes({ ...at, statusCode: 302, body: '' })).toBe('HTTP 302 (redirects are not followed)');
    expect(webhookRes({ ...at, statusCode: 500, body: `a \n\t b${'x'.repeat(300)}` })).toBe(`HTTP 500: a b${'x'.repeat(197)}...`);
    expect(webhookRes({ ...at, statusCode: null, body: '', error: 'TIMEOUT: no response within 15000 ms' })).toBe('TIMEOUT: no response within 15000 ms');
  });
});

describe.each(STORAGE_KINDS)('webhook outcomes in the log (%s)', (kind) => {
  const h = manualClockWebhooks(kind);
  const { clock, scope } = h;
  let t: TestContext;
  let receiver: WebhookReceiver;
  let service: WebhooksService;
  beforeAll(() => ({ t, receiver, service } = h));
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs?.[0] as Record<string, unknown>;
  const webhookFields = (record: Record<string, unknown>) => Object.fromEntries(Object.entries(record).filter(([k]) => k.includes('_webhook_')));
  const emit = (event: Omit<NewWebhookEvent, 'accountId' | 'envId'>) =>
    t.deps.db.transaction().execute((trx) => service.outbox.emit(trx, [{ accountId: t.account.accountId, envId: t.account.clientId, ...event }]));
  const inbound = (type: 'EMAIL_INBOUND' | 'SMS_INBOUND', trackingId: string): Omit<NewWebhookEvent, 'accountId' | 'envId'> => ({
    type,
    payload: { channel: type === 'EMAIL_INBOUND' ? 'EMAIL' : 'SMS', userId: 'user-x', notificationId: 'order_shipped', trackingId, occurredAt: clock.now().toISOString(), details: {} },
  });
  /** Runs the whole retry schedule out (the first attempt already made). */
  const exhaust = async () => {
    for (const delay of RETRY_DELAYS_MS) {
      clock.advance(delay);
      expect(await service.worker.runOnce()).toBeGreaterThan(0);
    }
  };
  const endpoints: string[] = [];
  const create = async (events: string[], url = receiver.url) => {
    const { id } = await service.create(scope(), { webhook: url, events });
    endpoints.push(id);
    return id;
  };

  beforeEach(() => {
    receiver.requests.length = 0;
    receiver.answer({ status: 200, body: 'ok' });
  });
  afterEach(async () => {
    for (const id of endpoints.splice(0)) await service.delete(scope(), id).catch(() => undefined);
  });

  it('a 2xx sets the event\'s _webhook_res at once; an event with no such field sets nothing', async () => {
    await create(['EMAIL_DELIVERED', 'SMS_FAILED']);
    receiver.answer({ status: 200, body: '{"received": true}\n' });
    const email = await transition(t, 'email', 'sent');
    const sms = await transition(t, 'sms', 'failed');
    expect(await service.worker.runOnce()).toBe(2);
    expect(webhookFields(await log(email))).toEqual({ email_delivered_webhook_res: 'HTTP 200: {"received": true}' });
    expect(webhookFields(await log(sms))).toEqual({});
    // Never the signature or the secret: only what the endpoint answered.
    expect(receiver.requests).toHaveLength(2);
  });

  it('a failure is recorded once no retry is left, not while one is', async () => {
    await create(['EMAIL_FAILED']);
    receiver.answer({ status: 500, body: 'boom' });
    const trackingId = await transition(t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    expect(webhookFields(await log(trackingId))).toEqual({});
    await exhaust();
    expect(receiver.requests).toHaveLength(10);
    expect(webhookFields(await log(trackingId))).toEqual({ email_failed_webhook_res: 'HTTP 500: boom' });
  });

  it('an endpoint that never answers: the reason, as the attempts show it', async () => {
    const closed = await new WebhookReceiver().start();
    await closed.close();
    const endpointId = await create(['EMAIL_FAILED'], closed.url);
    const trackingId = await transition(t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    await exhaust();
    const { attempts } = await service.attempts(scope(), endpointId, {});
    expect(attempts[0]).toMatchObject({ statusCode: null, nextAttemptAt: null, error: expect.any(String) });
    const res = (await log(trackingId)).email_failed_webhook_res;
    expect(res).toBe(attempts[0].error);
    expect(res).toMatch(/^NETWORK: /);
  });

  it('a retry that succeeds records the success; with two endpoints the last settled answer is kept', async () => {
    const second = await new WebhookReceiver().start();
    try {
      await create(['EMAIL_DELIVERED']);
      await create(['EMAIL_DELIVERED'], second.url);
      receiver.answer({ status: 202, body: 'first' });
      second.answer({ status: 503, body: 'busy' }, { status: 200, body: 'second' });
      const trackingId = await transition(t, 'email', 'sent');
      expect(await service.worker.runOnce()).toBe(2);
      expect((await log(trackingId)).email_delivered_webhook_res).toBe('HTTP 202: first');
      clock.advance(RETRY_DELAYS_MS[0]);
      expect(await service.worker.runOnce()).toBe(1);
      expect((await log(trackingId)).email_delivered_webhook_res).toBe('HTTP 200: second');
    } finally {
      await second.close();
    }
  });

  it('inbound events set _webhook_delivered: true on a 2xx, false on a final failure (410)', async () => {
    await create(['EMAIL_INBOUND', 'SMS_INBOUND']);
    const email = await transition(t, 'email', 'sent');
    const sms = await transition(t, 'sms', 'sent');
    await emit(inbound('EMAIL_INBOUND', email));
    await emit(inbound('SMS_INBOUND', sms));
    expect(await service.worker.runOnce()).toBe(2);
    expect(webhookFields(await log(email))).toEqual({ email_inbound_webhook_delivered: true, email_inbound_webhook_res: 'HTTP 200: ok' });
    expect(webhookFields(await log(sms))).toEqual({ sms_inbound_webhook_delivered: true, sms_inbound_webhook_res: 'HTTP 200: ok' });

    // A later reply to the same message whose delivery fails for good: the fields say so.
    receiver.answer({ status: 410, body: 'gone' });
    await emit(inbound('EMAIL_INBOUND', email));
    expect(await service.worker.runOnce()).toBe(1);
    expect(webhookFields(await log(email))).toEqual({ email_inbound_webhook_delivered: false, email_inbound_webhook_res: 'HTTP 410: gone' });
  });

  it('a 410 disables the endpoint: its deliveries still waiting for a retry settle as ENDPOINT_DISABLED', async () => {
    await create(['EMAIL_FAILED', 'EMAIL_INBOUND']);
    receiver.answer({ status: 500, body: 'boom' });
    const waiting = await transition(t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    expect(webhookFields(await log(waiting))).toEqual({});

    receiver.answer({ status: 410, body: 'gone' });
    const replied = await transition(t, 'email', 'sent');
    await emit(inbound('EMAIL_INBOUND', replied));
    // Only the reply is due; the failed event waits for its retry, and is failed by the 410.
    expect(await service.worker.runOnce()).toBe(1);
    expect(webhookFields(await log(replied))).toEqual({ email_inbound_webhook_delivered: false, email_inbound_webhook_res: 'HTTP 410: gone' });
    const res = (await log(waiting)).email_failed_webhook_res;
    expect(res).toMatch(/^ENDPOINT_DISABLED: The endpoint answered 410 Gone at .*; it was disabled\./);
    clock.advance(RETRY_DELAYS_MS[0]);
    expect(await service.worker.runOnce()).toBe(0);
    expect(receiver.requests).toHaveLength(2);
  });

  it('an event of no message (new mail, a purged message) is delivered and sets nothing', async () => {
    const endpointId = await create(['EMAIL_INBOUND']);
    await emit(inbound('EMAIL_INBOUND', ''));
    await emit(inbound('EMAIL_INBOUND', 'trk-purged'));
    expect(await service.worker.runOnce()).toBe(2);
    const { attempts } = await service.attempts(scope(), endpointId, {});
    expect(attempts.map((a) => a.success)).toEqual([true, true]);
  });
});

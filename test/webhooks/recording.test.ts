// Recording attempts when something around them goes wrong: an endpoint deleted while its
// deliveries are in flight (the other endpoints' results are kept), a claim that fails after a
// flush (logged; the next tick delivers), a response body holding a NUL (stored as U+FFFD on
// both engines, recorded once). Requests are held by a loopback receiver until the test answers
// them; due times follow the manual clock.
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import type { WebhookWorkerOptions } from '../../src/modules/webhooks/webhooks.worker.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { RoutedReceiver } from './routed-receiver.js';
import { manualClockWebhooks, patientService, transition } from './webhook-fixtures.js';

describe.each(STORAGE_KINDS)('recording webhook attempts (%s)', (kind) => {
  const h = manualClockWebhooks(kind);
  const { scope } = h;
  let receiver: RoutedReceiver;
  beforeAll(async () => {
    receiver = await new RoutedReceiver().start();
  });
  afterAll(() => receiver.close());

  const made: { service: WebhooksService; endpoints: string[] }[] = [];
  const serve = (options: Partial<WebhookWorkerOptions> = {}, logger?: pino.Logger) => {
    const service = patientService(h.t, options, logger);
    made.push({ service, endpoints: [] });
    return service;
  };
  const create = async (service: WebhooksService, path: string, events = ['EMAIL_FAILED']) => {
    const { id } = await service.create(scope(), { webhook: receiver.url(path), events });
    made.find((m) => m.service === service)!.endpoints.push(id);
    return id;
  };
  afterEach(async () => {
    for (const { service, endpoints } of made.splice(0)) {
      await service.worker.stop();
      await service.sender.close();
      for (const id of endpoints) await service.delete(scope(), id).catch(() => undefined);
    }
  });

  it("an endpoint deleted while its deliveries are in flight: the other endpoint's results are recorded, nothing is sent twice", async () => {
    const service = serve();
    receiver.route('/deleted', 'hold');
    receiver.route('/kept', 'hold');
    const deleted = await create(service, '/deleted');
    const kept = await create(service, '/kept');
    for (let i = 0; i < 3; i++) await transition(h.t, 'email', 'failed');
    const run = service.worker.runOnce();
    await eventually(() => receiver.to('/deleted').length === 3 && receiver.to('/kept').length === 3, 10_000, 'six requests in flight');
    await service.delete(scope(), deleted);
    receiver.release('/deleted');
    receiver.release('/kept');
    // The six results are recorded in one batch.
    expect(await run).toBe(6);
    // Past the leases: a delivery whose result was not recorded would be due again now.
    h.clock.advance(60_000);
    expect(await service.worker.runOnce()).toBe(0);
    const sent = receiver.to('/kept').map((r) => r.eventId);
    expect(new Set(sent).size).toBe(3);
    expect(sent).toHaveLength(3);
    const { attempts } = await service.attempts(scope(), kept, {});
    expect(attempts.map((a) => [a.eventId, a.attempt, a.success, a.trigger]).sort()).toEqual(sent.map((id) => [id, 1, true, 'event']).sort());
  });

  it('a claim that fails after a flush is logged, not an unhandled rejection, and the next tick delivers', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
    // No poll within the test: only the nudge below makes the next tick.
    const service = serve({ pollMs: 3_600_000 }, logger);
    receiver.route('/claim', 'hold');
    const endpointId = await create(service, '/claim');
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await transition(h.t, 'email', 'failed');
      service.worker.start();
      await eventually(() => receiver.to('/claim').length === 1, 10_000, 'the first request');
      // The flush's transaction (record, then claim) fails, recording alone succeeds, and the
      // claim that follows fails too, as SQLITE_BUSY from another process would make them.
      const plan = ['fail', 'pass', 'fail'];
      const transaction = service.repo.transaction.bind(service.repo);
      const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      const spy = vi.spyOn(service.repo, 'transaction').mockImplementation((work) => (plan.shift() === 'fail' ? Promise.reject(busy) : transaction(work)));
      try {
        receiver.release('/claim');
        await eventually(async () => plan.length === 0 && (await service.attempts(scope(), endpointId, {})).attempts.length === 1, 10_000, 'the attempt recorded');
        // Unhandled rejections are reported once the microtasks run out.
        await new Promise(setImmediate);
        await new Promise(setImmediate);
        expect(unhandled).toEqual([]);
        expect(lines.filter((l) => l.includes('claiming deliveries failed'))).toHaveLength(1);
      } finally {
        spy.mockRestore();
      }
      await transition(h.t, 'email', 'failed');
      service.worker.nudge();
      await eventually(async () => (await service.attempts(scope(), endpointId, {})).attempts.length === 2, 10_000, 'the next event delivered');
      expect(receiver.to('/claim')).toHaveLength(2);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('a response body with a NUL is recorded once, with U+FFFD for it, and not sent again', async () => {
    const service = serve();
    receiver.route('/nul', { status: 200, body: 'ok\u0000zz' });
    const endpointId = await create(service, '/nul');
    const trackingId = await transition(h.t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    h.clock.advance(60_000);
    expect(await service.worker.runOnce()).toBe(0);
    expect(receiver.to('/nul')).toHaveLength(1);
    const { attempts } = await service.attempts(scope(), endpointId, {});
    expect(attempts).toEqual([expect.objectContaining({ attempt: 1, success: true, statusCode: 200, response: 'ok\uFFFDzz' })]);
    const log = (await h.t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: h.t.auth })).json().logs[0];
    expect(log.email_failed_webhook_res).toBe('HTTP 200: ok\uFFFDzz');
  });
});

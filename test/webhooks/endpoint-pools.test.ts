// Endpoints on one host have connections of their own: two endpoints that never answer, on the
// same 127.0.0.1 port as a third, hold their 8 requests each, and the third gets all its events
// meanwhile (with one pool per origin, the hanging ones held every connection of it).
import { describe, expect, it } from 'vitest';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { RoutedReceiver } from './routed-receiver.js';
import { manualClockWebhooks, patientService, transition } from './webhook-fixtures.js';

describe.each(STORAGE_KINDS)('webhook endpoints on one host (%s)', (kind) => {
  const h = manualClockWebhooks(kind);

  it("two hanging endpoints do not take a third one's connections", async () => {
    const receiver = await new RoutedReceiver().start();
    receiver.route('/hang-a', 'hang');
    receiver.route('/hang-b', 'hang');
    const service = patientService(h.t);
    const endpoints: string[] = [];
    const create = async (path: string, events: string[]) => {
      const { id } = await service.create(h.scope(), { webhook: receiver.url(path), events });
      endpoints.push(id);
      return id;
    };
    try {
      await create('/hang-a', ['SMS_FAILED']);
      await create('/hang-b', ['PUSH_FAILED']);
      const fine = await create('/fine', ['EMAIL_FAILED']);
      for (let i = 0; i < 10; i++) await transition(h.t, 'sms', 'failed');
      for (let i = 0; i < 10; i++) await transition(h.t, 'mobile_push', 'failed');
      service.worker.start();
      await eventually(() => receiver.to('/hang-a').length === 8, 10_000, 'the first hanging endpoint to hold 8 requests');
      const made: string[] = [];
      for (let i = 0; i < 30; i++) made.push(await transition(h.t, 'email', 'failed'));
      service.worker.nudge();
      await eventually(async () => (await service.attempts(h.scope(), fine, { limit: 50 })).attempts.length === 30, 10_000, '30 attempts to the third endpoint');
      expect(receiver.to('/fine').map((r) => (JSON.parse(r.body) as { trackingId: string }).trackingId).sort()).toEqual(made.sort());
      expect((await service.attempts(h.scope(), fine, { limit: 50 })).attempts.every((a) => a.success)).toBe(true);
      // Both hang meanwhile, with 8 requests each: their share, and no more.
      await eventually(() => receiver.to('/hang-b').length === 8, 10_000, 'the second hanging endpoint to hold 8 requests');
      expect([receiver.to('/hang-a').length, receiver.to('/hang-b').length]).toEqual([8, 8]);
    } finally {
      // Ends the hanging requests, so that the worker's stop does not wait for their timeout.
      await receiver.close();
      await service.worker.stop();
      await service.sender.close();
      for (const id of endpoints) await service.delete(h.scope(), id);
    }
  });
});

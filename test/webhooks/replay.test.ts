// Replays and recoveries: never of a delivery in flight (409, nothing taken over), one attempt
// for a burst of replays, attempt numbers that follow each other, and the trigger 'replay' for
// the first attempt of a replayed or recovered round, also when the endpoint never had one.
// Requests are held by a loopback receiver until the test answers them; manual clock.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import type { WebhookTables } from '../../src/modules/webhooks/webhooks.tables.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { RoutedReceiver } from './routed-receiver.js';
import { manualClockWebhooks, patientService, transition } from './webhook-fixtures.js';

describe.each(STORAGE_KINDS)('webhook replays (%s)', (kind) => {
  const h = manualClockWebhooks(kind);
  const { scope, clock } = h;
  let receiver: RoutedReceiver;
  let service: WebhooksService;
  const endpoints: string[] = [];
  beforeAll(async () => {
    receiver = await new RoutedReceiver().start();
  });
  afterAll(() => receiver.close());
  beforeAll(() => {
    service = patientService(h.t);
  });
  afterAll(() => service.sender.close());
  afterEach(async () => {
    for (const id of endpoints.splice(0)) await service.delete(scope(), id);
  });

  const create = async (path: string, events = ['EMAIL_FAILED']) => {
    const { id } = await service.create(scope(), { webhook: receiver.url(path), events });
    endpoints.push(id);
    return id;
  };
  const replay = (endpointId: string, eventId: string) => h.t.app.inject({ method: 'POST', url: `/webhooks/${endpointId}/events/${eventId}/replay`, headers: h.t.auth });
  const tried = async (endpointId: string) => (await service.attempts(scope(), endpointId, {})).attempts.map((a) => [a.eventId, a.attempt, a.trigger]);
  /** An event written by a producer (WebhookOutbox.emit): its deliveries are due, not leased. */
  const emit = () =>
    h.t.deps.db.transaction().execute((trx) =>
      service.outbox.emit(trx, [
        { ...scope(), type: 'EMAIL_FAILED', payload: { channel: 'EMAIL', userId: 'u', notificationId: 'n', trackingId: '', occurredAt: clock.now().toISOString(), details: {} } },
      ]),
    );
  /** The events of the endpoint's deliveries never attempted. */
  const untried = async (endpointId: string) =>
    (await h.t.deps.db.withTables<WebhookTables>().selectFrom('webhook_deliveries').select('event_id').where('endpoint_id', '=', endpointId).where('attempts', '=', 0).execute()).map((d) => d.event_id);

  it('a replay while the event is being delivered answers 409 and takes nothing over', async () => {
    receiver.route('/busy', 'hold');
    const endpointId = await create('/busy');
    await transition(h.t, 'email', 'failed');
    const run = service.worker.runOnce();
    const [held] = await eventually(() => receiver.to('/busy').length === 1 && receiver.to('/busy'), 10_000, 'the request in flight');
    const answers = await Promise.all(Array.from({ length: 10 }, () => replay(endpointId, held.eventId)));
    for (const res of answers) {
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toEqual({
        code: 'CONFLICT',
        message: `Event ${held.eventId} is being delivered to webhook endpoint "${endpointId}" now.`,
        fix: `Replay it when the attempt ends (GET /webhooks/${endpointId}/attempts lists it).`,
      });
    }
    receiver.release('/busy');
    expect(await run).toBe(1);
    // Nothing was made due again by the refused replays.
    expect(await service.worker.runOnce()).toBe(0);
    // Once the attempt ended, a replay sends the event again, as the next attempt.
    expect((await replay(endpointId, held.eventId)).statusCode).toBe(202);
    expect(await service.worker.runOnce()).toBe(1);
    expect(await tried(endpointId)).toEqual([
      [held.eventId, 2, 'replay'],
      [held.eventId, 1, 'event'],
    ]);
    expect(receiver.to('/busy')).toHaveLength(2);
  });

  it('concurrent replays of a settled delivery make one attempt; a replay that read a state since changed restarts nothing', async () => {
    const endpointId = await create('/settled');
    await transition(h.t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    const eventId = receiver.to('/settled')[0].eventId;
    const answers = await Promise.all(Array.from({ length: 10 }, () => replay(endpointId, eventId)));
    expect(answers.map((r) => r.statusCode)).toEqual(new Array(10).fill(202));
    expect(await service.worker.runOnce()).toBe(1);
    expect(await service.worker.runOnce()).toBe(0);
    const seen = (await service.repo.findDelivery(endpointId, eventId))!;
    const now = clock.now().toISOString();
    expect(await service.repo.restartDelivery(seen, now, 'replay')).toBe(true);
    expect(await service.repo.restartDelivery(seen, now, 'replay')).toBe(false);
    expect(await service.worker.runOnce()).toBe(1);
    expect(await tried(endpointId)).toEqual([
      [eventId, 3, 'replay'],
      [eventId, 2, 'replay'],
      [eventId, 1, 'event'],
    ]);
  });

  it('the first attempt of a replay is a replay, also of an event the endpoint never had a delivery or attempt of', async () => {
    const first = await create('/first');
    await transition(h.t, 'email', 'failed');
    expect(await service.worker.runOnce()).toBe(1);
    const eventId = receiver.to('/first')[0].eventId;
    // A delivery written due (attempts 0), replayed before its first attempt.
    await emit();
    const [unattempted] = await untried(first);
    expect((await replay(first, unattempted)).statusCode).toBe(202);
    // Made after both events: no delivery of them.
    const later = await create('/later');
    expect((await replay(later, eventId)).statusCode).toBe(202);
    expect(await service.worker.runOnce()).toBe(2);
    expect(await tried(later)).toEqual([[eventId, 1, 'replay']]);
    expect(await tried(first)).toEqual([
      [unattempted, 1, 'replay'],
      [eventId, 1, 'event'],
    ]);
  });

  it('the first attempt of a recovery is a replay, also of a delivery failed before any attempt (its endpoint was disabled)', async () => {
    const since = clock.now().toISOString();
    receiver.route('/disabled', 'hold');
    const endpointId = await create('/disabled');
    await transition(h.t, 'email', 'failed');
    const run = service.worker.runOnce();
    const [gone] = await eventually(() => receiver.to('/disabled').length === 1 && receiver.to('/disabled'), 10_000, 'the request in flight');
    // Written due while the first is in flight; the 410 that disables the endpoint fails it unattempted.
    await emit();
    const [unattempted] = (await untried(endpointId)).filter((id) => id !== gone.eventId);
    receiver.release('/disabled', { status: 410 });
    expect(await run).toBe(1);
    expect((await service.get(scope(), endpointId)).disabled).toBe(true);
    await service.update(scope(), endpointId, { webhook: receiver.url('/disabled'), events: ['EMAIL_FAILED'] });
    receiver.route('/disabled', { status: 200, body: 'ok' });
    expect(await service.recover(scope(), endpointId, since)).toEqual({ recovered: 2 });
    expect(await service.worker.runOnce()).toBe(2);
    expect((await tried(endpointId)).sort()).toEqual(
      [
        [gone.eventId, 1, 'event'],
        [gone.eventId, 2, 'replay'],
        [unattempted, 1, 'replay'],
      ].sort(),
    );
  });
});

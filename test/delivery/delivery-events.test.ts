// delivery_events: one row per applied transition, in the same transaction, with ids that
// increase by one per environment in commit order.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptRow } from '../../src/modules/sending/sending.tables.js';
import { deferred } from '../../src/storage/pg-prepared.js';
import { STORAGE_KINDS, type TestStorage, createTestStorage } from '../helpers/storage.js';
import { AT, capturingLedger, deliveryOf, deliveryRow, eventsOf, messageRow, messageState, seed } from './ledger-fixtures.js';

const attempt = (deliveryId: string, n: number): AttemptRow => ({
  id: `${deliveryId}-a${n}`,
  delivery_id: deliveryId,
  attempt: n,
  started_at: AT,
  duration_ms: 1,
  outcome: 'success',
  provider_code: null,
  detail: null,
});

describe.each(STORAGE_KINDS)('delivery_events (%s)', (kind) => {
  let storage: TestStorage;
  beforeAll(async () => {
    storage = await createTestStorage(kind);
  });
  afterAll(() => storage.destroy());

  it('writes one row per applied transition, in order, numbered per environment', async () => {
    const { ledger } = capturingLedger(storage);
    const a1 = messageRow({ tracking_id: 'ev-a1', account_id: 'acc', env_id: 'env-a', state: 'queued' });
    const a2 = messageRow({ tracking_id: 'ev-a2', account_id: 'acc', env_id: 'env-a', state: 'scheduled', scheduled_for: AT });
    const b1 = messageRow({ tracking_id: 'ev-b1', account_id: 'acc', env_id: 'env-b', state: 'queued' });
    await seed(storage.db, [a1, a2, b1]);

    // Processing: the message, a delivery left for its job, one delivered in the same transaction (in-app).
    const sms = deliveryRow(a1, { id: 'ev-a1-sms', channel: 'sms' });
    const inapp = deliveryRow(a1, { id: 'ev-a1-inapp', channel: 'inapp', status: 'delivered', attempts: 1, sent_at: AT, delivered_at: AT });
    await ledger.transaction(async (tx) => {
      expect(await tx.markProcessed(a1, { at: AT, skipped: { email: 'NO_EMAIL' } })).toBe(true);
      await tx.insertDeliveries([sms, inapp], [attempt(inapp.id, 1)]);
    });
    // Another environment has its own numbers.
    await ledger.failMessages([b1.tracking_id], { at: AT, code: 'USER_DELETED', reason: 'gone' });
    // The provider call, then its report.
    await ledger.transaction((tx) => tx.deliverySucceeded(sms.id, attempt(sms.id, 1), { at: AT, providerMessageId: 'SMev' }));
    await ledger.recordProviderStatus({ channel: 'sms', providerMessageId: 'SMev', status: 'delivered', at: new Date('2026-01-15T10:00:03.000Z') });
    // A schedule update and cancelation; a retry and a refused change write nothing.
    await ledger.transaction((tx) => tx.reschedule(a2.tracking_id, { scheduled_for: '2026-01-16T00:00:00.000Z', schedule_updated_to: '2026-01-16T00:00:00.000Z' }, AT));
    await ledger.transaction((tx) => tx.cancelScheduled(a2.tracking_id, AT));
    await ledger.transaction((tx) => tx.markProcessed(a2, { at: AT, skipped: {} }));

    const a = await eventsOf(storage.db, { envId: 'env-a' });
    expect(a.map((e) => [e.id, e.kind, e.tracking_id, e.delivery_id, e.channel, e.from_state, e.to_state])).toEqual([
      [1, 'message', 'ev-a1', null, null, 'queued', 'processed'],
      [2, 'delivery', 'ev-a1', 'ev-a1-sms', 'sms', null, 'pending'],
      [3, 'delivery', 'ev-a1', 'ev-a1-inapp', 'inapp', null, 'pending'],
      [4, 'delivery', 'ev-a1', 'ev-a1-inapp', 'inapp', 'pending', 'delivered'],
      [5, 'delivery', 'ev-a1', 'ev-a1-sms', 'sms', 'pending', 'sent'],
      [6, 'delivery', 'ev-a1', 'ev-a1-sms', 'sms', 'sent', 'delivered'],
      [7, 'message', 'ev-a2', null, null, 'scheduled', 'scheduled'],
      [8, 'message', 'ev-a2', null, null, 'scheduled', 'canceled'],
    ]);
    expect(JSON.parse(a[0].details!)).toEqual({ skipped: { email: 'NO_EMAIL' } });
    expect(a[5].at).toBe('2026-01-15T10:00:03.000Z');
    expect(JSON.parse(a[6].details!)).toEqual({ scheduledFor: '2026-01-16T00:00:00.000Z' });
    const b = await eventsOf(storage.db, { envId: 'env-b' });
    expect(b.map((e) => [e.id, e.account_id, e.from_state, e.to_state, e.code])).toEqual([[1, 'acc', 'queued', 'failed', 'USER_DELETED']]);
    expect(await messageState(storage.db, a2.tracking_id)).toBe('canceled');
  });

  it('records a batch of provider calls as one by one: each success moves its delivery with its own values, in order; a delivery no longer pending is left alone', async () => {
    const { ledger, lines } = capturingLedger(storage);
    const m = messageRow({ tracking_id: 'ev-batch', account_id: 'acc', env_id: 'env-batch', state: 'processed' });
    const [email, push, inapp, sms] = (['email', 'web_push', 'inapp', 'sms'] as const).map((channel) => deliveryRow(m, { id: `ev-batch-${channel}`, channel }));
    const settled = { ...sms, status: 'sent' as const, attempts: 1, sent_at: AT };
    await seed(storage.db, [m], [email, push, inapp, settled]);
    const later = '2026-01-15T10:00:05.000Z';
    const changed = await ledger.transaction((tx) =>
      tx.recordAttempts([
        { kind: 'sent', deliveryId: email.id, attempt: attempt(email.id, 1), success: { at: AT, providerMessageId: 'm-1', extra: { email_sent_message_id: '<m-1>' } } },
        { kind: 'failed', deliveryId: push.id, attempt: { ...attempt(push.id, 1), outcome: 'failed' }, failure: { at: AT, code: 'GONE', reason: 'expired' } },
        { kind: 'sent', deliveryId: inapp.id, attempt: attempt(inapp.id, 2), success: { at: later, delivered: true } },
        { kind: 'sent', deliveryId: sms.id, attempt: attempt(sms.id, 2), success: { at: later, providerMessageId: 'SM-again' } },
      ]),
    );
    expect(changed).toEqual([true, true, true, false]);
    expect(await deliveryOf(storage.db, email.id)).toMatchObject({ status: 'sent', attempts: 1, sent_at: AT, delivered_at: null, provider_message_id: 'm-1', extra: '{"email_sent_message_id":"<m-1>"}', updated_at: AT });
    expect(await deliveryOf(storage.db, push.id)).toMatchObject({ status: 'failed', failed_code: 'GONE' });
    expect(await deliveryOf(storage.db, inapp.id)).toMatchObject({ status: 'delivered', attempts: 2, sent_at: later, delivered_at: later, provider_message_id: null, extra: null });
    expect(await deliveryOf(storage.db, sms.id)).toMatchObject({ status: 'sent', attempts: 1, provider_message_id: null });
    const events = await eventsOf(storage.db, { envId: 'env-batch' });
    expect(events.map((e) => [e.id, e.delivery_id, e.from_state, e.to_state, e.at])).toEqual([
      [1, email.id, 'pending', 'sent', AT],
      [2, push.id, 'pending', 'failed', AT],
      [3, inapp.id, 'pending', 'delivered', later],
    ]);
    expect(lines.some((l) => l.deliveryId === sms.id && String(l.msg).includes('no longer in the expected state'))).toBe(true);
  });

  it('rolls the events back with their transaction', async () => {
    const { ledger } = capturingLedger(storage);
    const m = messageRow({ tracking_id: 'rb-1', account_id: 'acc', env_id: 'env-rb', state: 'queued' });
    await seed(storage.db, [m]);
    await ledger.failMessages(['none-such'], { at: AT, code: 'X', reason: 'nothing to fail' });

    await expect(
      ledger.transaction(async (tx) => {
        expect(await tx.markProcessed(m, { at: AT, skipped: {} })).toBe(true);
        await tx.insertDeliveries([deliveryRow(m, { id: 'rb-1-email', channel: 'email' })]);
        throw new Error('after the transition');
      }),
    ).rejects.toThrow('after the transition');
    expect(await messageState(storage.db, m.tracking_id)).toBe('queued');
    expect(await deliveryOf(storage.db, 'rb-1-email')).toBeUndefined();
    expect(await eventsOf(storage.db, { envId: 'env-rb' })).toEqual([]);

    // The next transition of the environment takes id 1: the rolled-back ids were never given out.
    await ledger.transaction((tx) => tx.markProcessed(m, { at: AT, skipped: {} }));
    expect((await eventsOf(storage.db, { envId: 'env-rb' })).map((e) => [e.id, e.to_state])).toEqual([[1, 'processed']]);
  });

  it('drops the events of a savepoint rolled back inside a batch (the worker\'s per-message savepoints)', async () => {
    const { ledger } = capturingLedger(storage);
    const [kept, dropped] = ['sp-kept', 'sp-dropped'].map((id) => messageRow({ tracking_id: id, account_id: 'acc', env_id: 'env-sp', state: 'queued' }));
    await seed(storage.db, [kept, dropped]);
    await ledger.transaction(async (tx) => {
      await tx.markProcessed(kept, { at: AT, skipped: {} });
      await sql`savepoint one_message`.execute(tx.db);
      const mark = tx.checkpoint();
      await tx.markProcessed(dropped, { at: AT, skipped: {} });
      await sql`rollback to savepoint one_message`.execute(tx.db);
      await sql`release savepoint one_message`.execute(tx.db);
      tx.rollbackTo(mark);
    });
    expect(await messageState(storage.db, 'sp-dropped')).toBe('queued');
    expect((await eventsOf(storage.db, { envId: 'env-sp' })).map((e) => [e.id, e.tracking_id])).toEqual([[1, 'sp-kept']]);
  });

  it("fails one message's savepoint alone when its attempt cannot be written, as the worker writes them (SAVEPOINT and the attempt sent without waiting on PostgreSQL, RELEASE waited for)", async () => {
    const { ledger } = capturingLedger(storage);
    const [first, broken, last] = ['dw-first', 'dw-broken', 'dw-last'].map((id) => messageRow({ tracking_id: id, account_id: 'acc', env_id: 'env-dw', state: 'queued' }));
    await seed(storage.db, [first, broken, last]);
    const inapp = (m: typeof first) => deliveryRow(m, { id: `${m.tracking_id}-inapp`, channel: 'inapp', status: 'delivered', attempts: 1, sent_at: AT, delivered_at: AT });
    const failures: string[] = [];
    await ledger.transaction(async (tx) => {
      for (const message of [first, broken, last]) {
        await sql.raw(deferred('savepoint process_message')).execute(tx.db);
        const mark = tx.checkpoint();
        try {
          await tx.markProcessed(message, { at: AT, skipped: {} });
          // The broken message's attempt reuses the first one's attempt id: a duplicate key, known only once RELEASE is answered.
          const delivery = inapp(message);
          const own = attempt(delivery.id, 1);
          await tx.insertDeliveries([delivery], [message === broken ? { ...own, id: attempt(inapp(first).id, 1).id } : own]);
          await sql`release savepoint process_message`.execute(tx.db);
        } catch (err) {
          failures.push(`${message.tracking_id}: ${(err as { code?: string }).code ?? (err as Error).message}`);
          await sql`rollback to savepoint process_message`.execute(tx.db);
          await sql`release savepoint process_message`.execute(tx.db);
          tx.rollbackTo(mark);
        }
      }
    });
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatch(kind === 'postgres' ? /^dw-broken: 23505$/ : /^dw-broken: SQLITE_CONSTRAINT_PRIMARYKEY$/);
    expect([await messageState(storage.db, 'dw-first'), await messageState(storage.db, 'dw-broken'), await messageState(storage.db, 'dw-last')]).toEqual(['processed', 'queued', 'processed']);
    expect((await eventsOf(storage.db, { envId: 'env-dw' })).map((e) => [e.tracking_id, e.to_state])).toEqual([
      ['dw-first', 'processed'],
      ['dw-first', 'pending'],
      ['dw-first', 'delivered'],
      ['dw-last', 'processed'],
      ['dw-last', 'pending'],
      ['dw-last', 'delivered'],
    ]);
  });

  it('numbers concurrent transactions of one environment without gaps or repeats', async () => {
    const { ledger } = capturingLedger(storage);
    const rows = Array.from({ length: 24 }, (_, i) => messageRow({ tracking_id: `cc-${String(i).padStart(2, '0')}`, account_id: 'acc', env_id: 'env-cc', state: 'queued' }));
    await seed(storage.db, rows);
    await Promise.all(rows.map((m) => ledger.transaction((tx) => tx.markProcessed(m, { at: AT, skipped: {} }))));
    const events = await eventsOf(storage.db, { envId: 'env-cc' });
    expect(events.map((e) => Number(e.id))).toEqual(rows.map((_, i) => i + 1));
    expect(new Set(events.map((e) => e.tracking_id)).size).toBe(rows.length);
  });

  it('is purged with the logs: events older than the retention go, newer ones stay', async () => {
    const { ledger } = capturingLedger(storage);
    const old = messageRow({ tracking_id: 'purge-old', account_id: 'acc', env_id: 'env-purge', state: 'queued', received_at: '2025-01-01T00:00:00.000Z' });
    const recent = messageRow({ tracking_id: 'purge-new', account_id: 'acc', env_id: 'env-purge', state: 'queued' });
    await seed(storage.db, [old, recent]);
    await ledger.transaction((tx) => tx.markProcessed(old, { at: '2025-01-01T00:00:01.000Z', skipped: {} }));
    await ledger.transaction((tx) => tx.markProcessed(recent, { at: AT, skipped: {} }));
    await ledger.purgeBefore('2026-01-01T00:00:00.000Z');
    expect(await messageState(storage.db, 'purge-old')).toBeUndefined();
    expect((await eventsOf(storage.db, { envId: 'env-purge' })).map((e) => [e.id, e.tracking_id])).toEqual([[2, 'purge-new']]);
  });
});

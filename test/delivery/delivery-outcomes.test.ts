// DeliveryOutcomes: what the ledger committed, told once: a warning per final failure whatever
// failed it, and tallies only of what committed (not of a rolled-back savepoint or transaction).
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptRow } from '../../src/modules/sending/sending.tables.js';
import { STORAGE_KINDS, type TestStorage, createTestStorage } from '../helpers/storage.js';
import { AT, capturingLedger, deliveryRow, messageRow, seed } from './ledger-fixtures.js';

const attempt = (deliveryId: string, n: number, outcome: AttemptRow['outcome'] = 'success'): AttemptRow => ({
  id: `${deliveryId}-a${n}`,
  delivery_id: deliveryId,
  attempt: n,
  started_at: AT,
  duration_ms: 30,
  outcome,
  provider_code: outcome === 'success' ? null : '30003',
  detail: outcome === 'success' ? null : 'Unreachable destination handset',
});

describe.each(STORAGE_KINDS)('delivery outcomes (%s)', (kind) => {
  let storage: TestStorage;
  beforeAll(async () => {
    storage = await createTestStorage(kind);
  });
  afterAll(() => storage.destroy());

  const counts = (ledger: ReturnType<typeof capturingLedger>['ledger']) =>
    Object.fromEntries([...ledger.outcomes.countsByOutcome()].map((c) => [`${c.channel} ${c.outcome}`, c.count]));

  it('logs every final failure once, with what failed it: a job given up, a carrier report, a message that never routed', async () => {
    const { ledger, lines } = capturingLedger(storage);
    const m = messageRow({ tracking_id: 'out-1', account_id: 'acc', env_id: 'env', state: 'processed' });
    const lost = messageRow({ tracking_id: 'out-2', account_id: 'acc', env_id: 'env', state: 'queued' });
    const given = deliveryRow(m, { id: 'out-1-email', channel: 'email' });
    const sms = deliveryRow(m, { id: 'out-1-sms', channel: 'sms' });
    await seed(storage.db, [m, lost], [given, sms]);

    await ledger.failDelivery(given.id, { at: AT, code: 'PROCESSING_FAILED', reason: 'worker lost on the last attempt' });
    await ledger.transaction((tx) => tx.deliverySucceeded(sms.id, attempt(sms.id, 1), { at: AT, providerMessageId: 'SMout' }));
    await ledger.recordProviderStatus({ channel: 'sms', providerMessageId: 'SMout', status: 'failed', code: 'UNDELIVERED', internal: 'carrier: 30003' });
    await ledger.failMessages([lost.tracking_id], { at: AT, code: 'USER_DELETED', reason: 'the recipient was deleted' });

    const failures = lines.filter((l) => l.level === 40);
    expect(failures.map(({ msg, channel, deliveryId, trackingId, code, error }) => ({ msg, channel, deliveryId, trackingId, code, error }))).toEqual([
      { msg: 'delivery failed', channel: 'email', deliveryId: given.id, trackingId: 'out-1', code: 'PROCESSING_FAILED', error: 'worker lost on the last attempt' },
      { msg: 'delivery failed', channel: 'sms', deliveryId: sms.id, trackingId: 'out-1', code: 'UNDELIVERED', error: 'carrier: 30003' },
      { msg: 'message failed before delivery', channel: undefined, deliveryId: undefined, trackingId: 'out-2', code: 'USER_DELETED', error: 'the recipient was deleted' },
    ]);
    // No provider call failed these: no attempt on the lines.
    expect(failures.some((l) => 'attempt' in l)).toBe(false);
    expect(counts(ledger)).toEqual({ 'email failed': 1, 'sms sent': 1, 'sms failed': 1 });
  });

  it('reports a retry with its next time, and nothing of a rolled-back savepoint or transaction', async () => {
    const { ledger, lines } = capturingLedger(storage);
    const m = messageRow({ tracking_id: 'out-3', account_id: 'acc', env_id: 'env', state: 'queued' });
    await seed(storage.db, [m]);
    const push = deliveryRow(m, { id: 'out-3-push', channel: 'web_push' });
    const inapp = deliveryRow(m, { id: 'out-3-inapp', channel: 'inapp', status: 'delivered', attempts: 1, sent_at: AT, delivered_at: AT });

    await ledger.transaction(async (tx) => {
      await tx.markProcessed(m, { at: AT, skipped: { sms: 'NO_NUMBER' } });
      await sql`savepoint undone`.execute(tx.db);
      const mark = tx.checkpoint();
      await tx.insertDeliveries([inapp], [attempt(inapp.id, 1)]);
      await sql`rollback to savepoint undone`.execute(tx.db);
      tx.rollbackTo(mark);
      await tx.insertDeliveries([push]);
    });
    const retryAt = '2026-01-15T10:00:05.000Z';
    await ledger.transaction((tx) => tx.recordAttempts([{ kind: 'retry', deliveryId: push.id, attempt: attempt(push.id, 1, 'retry'), at: AT, retryAt }]));
    // A transaction that fails after recording commits nothing, and reports nothing.
    await expect(
      ledger.transaction(async (tx) => {
        await tx.recordAttempts([{ kind: 'retry', deliveryId: push.id, attempt: attempt(push.id, 2, 'retry'), at: AT, retryAt }]);
        throw new Error('the commit failed');
      }),
    ).rejects.toThrow('the commit failed');

    const retries = lines.filter((l) => l.msg === 'delivery attempt failed; retrying');
    expect(retries).toEqual([
      expect.objectContaining({ level: 40, channel: 'web_push', trackingId: 'out-3', deliveryId: push.id, attempt: 1, providerCode: '30003', error: 'Unreachable destination handset', nextAttemptAt: retryAt }),
    ]);
    expect(counts(ledger)).toEqual({ 'sms skipped': 1, 'web_push retried': 1 });
    expect([...ledger.outcomes.latencyByChannel()].map((l) => [l.channel, l.count, l.sum])).toEqual([['web_push', 1, 0.03]]);
  });
});

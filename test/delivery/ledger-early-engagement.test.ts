// An open, a click or a reply can reach Clarion between the receiving server's 250 and the
// worker's commit of `sent` (a mail client that fetches images on arrival): the ledger records it
// on the pending delivery, and the `sent` commit, alone or in a batch, merges its own log fields
// into the delivery's instead of replacing them, so nothing recorded early is lost.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptOutcome } from '../../src/modules/delivery/ledger.js';
import type { AttemptRow } from '../../src/modules/sending/sending.tables.js';
import { STORAGE_KINDS, type TestStorage, createTestStorage } from '../helpers/storage.js';
import { AT, capturingLedger, deliveryOf, deliveryRow, messageRow, seed } from './ledger-fixtures.js';

const LATER = '2026-01-15T10:00:05.000Z';

describe.each(STORAGE_KINDS)('engagement before the sent commit (%s)', (kind) => {
  let storage: TestStorage;
  beforeAll(async () => {
    storage = await createTestStorage(kind);
  });
  afterAll(() => storage.destroy());

  const pendingEmail = async (id: string, status: 'pending' | 'failed' | 'skipped' = 'pending') => {
    const message = messageRow({ tracking_id: `t-${id}`, account_id: 'acc', env_id: 'env', state: 'processed' });
    await seed(storage.db, [message], [deliveryRow(message, { id, channel: 'email', status })]);
  };
  const attempt = (deliveryId: string): AttemptRow => ({ id: `${deliveryId}-a1`, delivery_id: deliveryId, attempt: 1, started_at: AT, duration_ms: 5, outcome: 'success', provider_code: '250', detail: null });
  const sent = (deliveryId: string): Extract<AttemptOutcome, { kind: 'sent' }> => ({
    kind: 'sent',
    deliveryId,
    attempt: attempt(deliveryId),
    success: { delivered: false, at: AT, providerMessageId: `<${deliveryId}@clarion>`, extra: { email_sent_message_id: `<${deliveryId}@clarion>`, email_sent_at: AT } },
  });
  const extraOf = async (id: string) => JSON.parse((await deliveryOf(storage.db, id))!.extra ?? '{}') as Record<string, unknown>;

  it('keeps an open and a click recorded on a pending delivery through a batch of sent commits', async () => {
    const { ledger } = capturingLedger(storage);
    await pendingEmail('early-open');
    await pendingEmail('early-click');
    await pendingEmail('no-engagement');
    const opened = await ledger.recordEngagement('early-open', 'env', { kind: 'open', at: LATER, userAgent: 'Prefetch/1.0' }, async () => undefined);
    expect(opened).toMatchObject({ id: 'early-open', status: 'pending', user_id: 'u1' });
    expect(await ledger.recordEngagement('early-click', 'env', { kind: 'click', at: LATER, link: 'https://shop.example/' }, async () => undefined)).toBeDefined();

    // Several successes: one UPDATE for all (succeededMany).
    expect(await ledger.transaction((tx) => tx.recordAttempts([sent('early-open'), sent('early-click'), sent('no-engagement')]))).toEqual([true, true, true]);

    expect((await deliveryOf(storage.db, 'early-open'))!.status).toBe('sent');
    expect(await extraOf('early-open')).toEqual({ email_opened_at: LATER, email_opened_user_agent: 'Prefetch/1.0', email_opened_last_at: LATER, email_opened_count: 1, email_sent_message_id: '<early-open@clarion>', email_sent_at: AT });
    expect(await extraOf('early-click')).toMatchObject({ email_clicked_at: LATER, email_clicked_link: 'https://shop.example/', email_clicked_count: 1, email_sent_message_id: '<early-click@clarion>' });
    expect(await extraOf('no-engagement')).toEqual({ email_sent_message_id: '<no-engagement@clarion>', email_sent_at: AT });
  });

  it('keeps an early reply through a single sent commit, and a later open counts on', async () => {
    const { ledger } = capturingLedger(storage);
    await pendingEmail('early-reply');
    expect(await ledger.mergeDeliveryDetails('early-reply', { email_inbound_at: LATER, email_inbound_subject: 'Re: hi' }, LATER)).toBe(true);
    expect(await ledger.transaction((tx) => tx.deliverySucceeded('early-reply', attempt('early-reply'), sent('early-reply').success))).toBe(true);
    expect(await extraOf('early-reply')).toEqual({ email_inbound_at: LATER, email_inbound_subject: 'Re: hi', email_sent_message_id: '<early-reply@clarion>', email_sent_at: AT });

    await ledger.recordEngagement('early-reply', 'env', { kind: 'open', at: LATER }, async () => undefined);
    await ledger.recordEngagement('early-reply', 'env', { kind: 'open', at: LATER }, async () => undefined);
    expect(await extraOf('early-reply')).toMatchObject({ email_opened_count: 2, email_inbound_subject: 'Re: hi', email_sent_at: AT });
  });

  it('records nothing on a failed or skipped delivery', async () => {
    const { ledger } = capturingLedger(storage);
    await pendingEmail('gone-failed', 'failed');
    await pendingEmail('gone-skipped', 'skipped');
    let ran = 0;
    for (const id of ['gone-failed', 'gone-skipped']) {
      expect(await ledger.recordEngagement(id, 'env', { kind: 'open', at: LATER }, async () => void ran++)).toBeUndefined();
      expect((await deliveryOf(storage.db, id))!.extra).toBeNull();
    }
    expect(ran).toBe(0);
  });
});

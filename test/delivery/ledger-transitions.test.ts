// The delivery ledger's table of transitions: every change it does not allow is refused, logged and
// never written (no state change, no delivery_events row); every change it allows is applied once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DELIVERY_STATES,
  MESSAGE_STATES,
  RESERVED_STATES,
  deliveryTransitionAllowed,
  messageTransitionAllowed,
  type DeliveryStatus,
  type MessageState,
} from '../../src/modules/delivery/transitions.js';
import type { DeliveryRow, MessageRow } from '../../src/modules/sending/sending.tables.js';
import { TelephonyCallbacks } from '../../src/modules/telephony/callbacks.service.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS, type TestStorage, createTestStorage } from '../helpers/storage.js';
import { AT, capturingLedger, deliveryOf, deliveryRow, eventsOf, messageRow, messageState, refusals, seed } from './ledger-fixtures.js';

const MESSAGE_ALL: MessageState[] = [...MESSAGE_STATES, ...RESERVED_STATES];
const DELIVERY_ALL: DeliveryStatus[] = [...DELIVERY_STATES, ...RESERVED_STATES];
const pairs = <S extends string>(states: S[]) => states.flatMap((from) => states.map((to) => [from, to] as const));

describe.each(STORAGE_KINDS)('delivery ledger transition table (%s)', (kind) => {
  let storage: TestStorage;
  beforeAll(async () => {
    storage = await createTestStorage(kind);
  });
  afterAll(() => storage.destroy());

  it('declares held with no transition into or out of it', () => {
    for (const reserved of RESERVED_STATES) {
      for (const other of MESSAGE_ALL) {
        expect(messageTransitionAllowed(reserved, other)).toBe(false);
        expect(messageTransitionAllowed(other, reserved)).toBe(false);
      }
      for (const other of DELIVERY_ALL) {
        expect(deliveryTransitionAllowed(reserved, other)).toBe(false);
        expect(deliveryTransitionAllowed(other, reserved)).toBe(false);
      }
    }
    expect(deliveryTransitionAllowed('delivered', 'failed')).toBe(false);
    expect(deliveryTransitionAllowed('sent', 'delivered')).toBe(true);
    // Digests: routing collects a delivery; it fails only when its digest cannot be made.
    expect(deliveryTransitionAllowed('new', 'digested')).toBe(true);
    expect(deliveryTransitionAllowed('digested', 'failed')).toBe(true);
    expect(deliveryTransitionAllowed('digested', 'sent')).toBe(false);
    expect(deliveryTransitionAllowed('pending', 'digested')).toBe(false);
  });

  it('lets a retract reach retracted from what was not processed or delivered yet (digests not sent included), and from in-app delivered, never out of it', () => {
    expect(MESSAGE_ALL.filter((from) => messageTransitionAllowed(from, 'retracted'))).toEqual(['scheduled', 'queued']);
    expect(DELIVERY_ALL.filter((from) => deliveryTransitionAllowed(from, 'retracted'))).toEqual(['pending', 'delivered', 'digested']);
    expect(MESSAGE_ALL.filter((to) => messageTransitionAllowed('retracted', to))).toEqual([]);
    expect(DELIVERY_ALL.filter((to) => deliveryTransitionAllowed('retracted', to))).toEqual([]);
    // Sent is out of reach: what another channel sent cannot be taken back.
    expect(deliveryTransitionAllowed('sent', 'retracted')).toBe(false);
  });

  it('refuses every message transition the table does not allow, and applies each one it allows', async () => {
    const { ledger, lines } = capturingLedger(storage);
    const env = 'env-msg-walk';
    const cases = pairs(MESSAGE_ALL).map(([from, to], i) => ({ from, to, row: messageRow({ tracking_id: `msg-walk-${i}`, account_id: 'acc', env_id: env, state: from as MessageRow['state'] }) }));
    await seed(storage.db, cases.map((c) => c.row));
    let refused = 0;
    for (const { from, to, row } of cases) {
      const applied = await ledger.transaction((tx) => tx.transitionMessage(row.tracking_id, to, { at: AT }));
      const events = await eventsOf(storage.db, { trackingId: row.tracking_id });
      if (messageTransitionAllowed(from, to)) {
        expect(applied, `${from} -> ${to}`).toBe(true);
        expect(await messageState(storage.db, row.tracking_id)).toBe(to);
        expect(events.map((e) => [e.kind, e.from_state, e.to_state])).toEqual([['message', from, to]]);
      } else {
        refused++;
        expect(applied, `${from} -> ${to}`).toBe(false);
        expect(await messageState(storage.db, row.tracking_id), `${from} -> ${to}`).toBe(from);
        expect(events, `${from} -> ${to}`).toEqual([]);
        expect(refusals(lines).some((l) => l.trackingId === row.tracking_id && l.from === from && l.to === to), `${from} -> ${to} logged`).toBe(true);
      }
    }
    // 7 states, 8 allowed changes (one is the schedule update, scheduled -> scheduled; two a retract).
    expect(refused).toBe(MESSAGE_ALL.length ** 2 - 8);
  });

  it('refuses every delivery transition the table does not allow, and applies each one it allows', async () => {
    const { ledger, lines } = capturingLedger(storage);
    const message = messageRow({ tracking_id: 'dlv-walk', account_id: 'acc', env_id: 'env-dlv-walk', state: 'processed' });
    const cases = pairs(DELIVERY_ALL).map(([from, to], i) => ({ from, to, row: deliveryRow(message, { id: `dlv-walk-${i}`, channel: `ch${i}`, status: from as DeliveryRow['status'] }) }));
    await seed(storage.db, [message], cases.map((c) => c.row));
    let refused = 0;
    for (const { from, to, row } of cases) {
      const applied = await ledger.transaction((tx) => tx.transitionDelivery(row.id, to, { at: AT }));
      const events = (await eventsOf(storage.db, { trackingId: message.tracking_id })).filter((e) => e.delivery_id === row.id);
      if (deliveryTransitionAllowed(from, to)) {
        expect(applied, `${from} -> ${to}`).toBe(true);
        expect((await deliveryOf(storage.db, row.id))?.status).toBe(to);
        expect(events.map((e) => [e.kind, e.channel, e.from_state, e.to_state])).toEqual([['delivery', row.channel, from, to]]);
      } else {
        refused++;
        expect(applied, `${from} -> ${to}`).toBe(false);
        expect((await deliveryOf(storage.db, row.id))?.status, `${from} -> ${to}`).toBe(from);
        expect(events, `${from} -> ${to}`).toEqual([]);
        expect(refusals(lines).some((l) => l.deliveryId === row.id && l.from === from && l.to === to), `${from} -> ${to} logged`).toBe(true);
      }
    }
    // 8 statuses, 9 allowed changes (digested -> failed, and three into retracted, among them).
    expect(refused).toBe(DELIVERY_ALL.length ** 2 - 9);
  });

  it('refuses the same changes through the callers\' methods: processing, failing, creating', async () => {
    const { ledger, lines } = capturingLedger(storage);
    const env = 'env-callers';
    const rows = (['queued', 'processed', 'canceled', 'failed'] as const).map((state) => messageRow({ tracking_id: `callers-${state}`, account_id: 'acc', env_id: env, state }));
    await seed(storage.db, rows);

    // Only the queued message fails; processed and canceled ones are refused (failed -> failed is a re-run).
    const failed = await ledger.failMessages(rows.map((r) => r.tracking_id), { at: AT, code: 'PROCESSING_FAILED', reason: 'test' });
    expect(failed).toEqual(['callers-queued']);
    for (const row of rows.slice(1)) expect(await messageState(storage.db, row.tracking_id)).toBe(row.state);
    expect(refusals(lines).map((l) => l.trackingId).sort()).toEqual(['callers-canceled', 'callers-processed']);

    // A canceled message is never processed.
    expect(await ledger.transaction((tx) => tx.markProcessed(rows[2], { at: AT, skipped: {} }))).toBe(false);
    expect(await messageState(storage.db, 'callers-canceled')).toBe('canceled');

    // A delivery cannot be created in a reserved status.
    const held = deliveryRow(rows[1], { id: 'callers-held', channel: 'email', status: 'held' as DeliveryRow['status'] });
    await ledger.transaction((tx) => tx.insertDeliveries([held]));
    expect(await deliveryOf(storage.db, 'callers-held')).toBeUndefined();

    const events = await eventsOf(storage.db, { envId: env });
    expect(events.map((e) => [e.tracking_id, e.from_state, e.to_state, e.code])).toEqual([['callers-queued', 'queued', 'failed', 'PROCESSING_FAILED']]);
  });

  it('refuses a provider failure reported after delivered: the delivery stays delivered', async () => {
    const { ledger, lines } = capturingLedger(storage);
    const message = messageRow({ tracking_id: 'late-failure', account_id: 'acc', env_id: 'env-late', state: 'processed' });
    const delivery = deliveryRow(message, { id: 'late-failure-sms', channel: 'sms', status: 'sent', sent_at: AT, provider_message_id: 'SMlate' });
    await seed(storage.db, [message], [delivery]);

    await ledger.recordProviderStatus({ channel: 'sms', providerMessageId: 'SMlate', status: 'delivered', at: new Date('2026-01-15T10:00:05.000Z') });
    await ledger.recordProviderStatus({ channel: 'sms', providerMessageId: 'SMlate', status: 'failed', code: 'UNDELIVERED', internal: 'late report', at: new Date('2026-01-15T10:00:09.000Z') });

    const row = await deliveryOf(storage.db, delivery.id);
    expect(row).toMatchObject({ status: 'delivered', delivered_at: '2026-01-15T10:00:05.000Z', failed_at: null, failed_code: null });
    const events = await eventsOf(storage.db, { trackingId: message.tracking_id });
    expect(events.map((e) => [e.from_state, e.to_state])).toEqual([['sent', 'delivered']]);
    expect(refusals(lines).filter((l) => l.deliveryId === delivery.id).map((l) => [l.from, l.to])).toEqual([['delivered', 'failed']]);
    // The refused report is handled (not applied again on the next report).
    const waiting = await storage.db.selectFrom('provider_events' as never).selectAll().where('applied_at' as never, 'is', null).execute();
    expect(waiting).toEqual([]);
  });
});

describe.each(STORAGE_KINDS)('a late carrier failure through the telephony callback (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('keeps the log delivered when "undelivered" arrives after "delivered"', async () => {
    const { ledger, lines } = capturingLedger(t.storage, t.deps.clock);
    const callbacks = new TelephonyCallbacks({ ...t.deps, ledger }, t.services.users, t.services.webhooks.outbox);
    const message = messageRow({ tracking_id: 'cb-late', account_id: t.account.accountId, env_id: t.account.clientId, state: 'processed', processed_at: AT });
    await seed(t.deps.db, [message], [deliveryRow(message, { id: 'cb-late-sms', channel: 'sms', status: 'sent', sent_at: AT, provider_message_id: 'SMcb' })]);
    const log = async () => (await t.app.inject({ method: 'GET', url: `/logs/${message.tracking_id}`, headers: t.auth })).json().logs[0];

    await callbacks.smsStatus({ MessageSid: 'SMcb', MessageStatus: 'delivered' });
    expect(await log()).toMatchObject({ sms_delivered_at: expect.any(String) });
    await callbacks.smsStatus({ MessageSid: 'SMcb', MessageStatus: 'undelivered', ErrorCode: '30003' });

    const after = await log();
    expect(after.sms_delivered_at).toEqual(expect.any(String));
    expect(after.sms_failed_at).toBeUndefined();
    expect(after.sms_failed_code).toBeUndefined();
    expect(refusals(lines).map((l) => [l.deliveryId, l.from, l.to])).toEqual([['cb-late-sms', 'delivered', 'failed']]);
    expect((await eventsOf(t.deps.db, { trackingId: message.tracking_id })).map((e) => e.to_state)).toEqual(['delivered']);
  });
});

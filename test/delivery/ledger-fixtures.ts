import type { Kysely } from 'kysely';
import pino from 'pino';
import { uuidIds } from '../../src/deps.js';
import type { DeliveryEventsTable } from '../../src/modules/delivery/delivery.tables.js';
import { DeliveryLedger } from '../../src/modules/delivery/ledger.js';
import type { DeliveryRow, MessageRow, SendingTables } from '../../src/modules/sending/sending.tables.js';
import type { Storage } from '../../src/storage/db.js';
import type { CoreTables } from '../../src/storage/schema.js';
import type { Clock } from '../../src/clock.js';
import { queuedMessageRow } from '../helpers/rows.js';

export const AT = '2026-01-15T10:00:00.000Z';

export type LogLine = Record<string, unknown> & { level: number; msg: string };

/** A ledger over `storage` whose log lines (debug and up) are kept in `lines`. */
export function capturingLedger(storage: Pick<Storage, 'db' | 'dialect'>, clock: Clock = { now: () => new Date(AT) }): { ledger: DeliveryLedger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { ledger: new DeliveryLedger({ db: storage.db, dialect: storage.dialect, clock, ids: uuidIds(), logger }), lines };
}

/** Warnings the ledger logged for refused transitions. */
export const refusals = (lines: LogLine[]) => lines.filter((l) => l.level === 40 && String(l.msg).includes('refused'));

const tables = (db: Kysely<CoreTables>) => db.withTables<SendingTables & { delivery_events: DeliveryEventsTable }>();

export function messageRow(over: Partial<MessageRow> & Pick<MessageRow, 'tracking_id' | 'account_id' | 'env_id'>): MessageRow {
  return queuedMessageRow({ notification_id: 'ledger_test', user_id: 'u1', request: '{"type":"ledger_test"}', received_at: AT, ...over });
}

export function deliveryRow(message: MessageRow, over: Partial<DeliveryRow> & Pick<DeliveryRow, 'id' | 'channel'>): DeliveryRow {
  return {
    tracking_id: message.tracking_id,
    account_id: message.account_id,
    env_id: message.env_id,
    routing: 'SEND',
    routing_reason: null,
    status: 'pending',
    content: '{}',
    preview: null,
    attempts: 0,
    sent_at: null,
    delivered_at: null,
    failed_at: null,
    failed_code: null,
    failed_internal: null,
    provider_message_id: null,
    extra: null,
    created_at: AT,
    updated_at: AT,
    ...over,
  };
}

/** Seeds rows as they were written before (states the ledger could not reach are written as raw values). */
export async function seed(db: Kysely<CoreTables>, messages: MessageRow[], deliveries: DeliveryRow[] = []): Promise<void> {
  if (messages.length) await tables(db).insertInto('messages').values(messages).execute();
  if (deliveries.length) await tables(db).insertInto('deliveries').values(deliveries).execute();
}

export const messageState = async (db: Kysely<CoreTables>, trackingId: string) =>
  (await tables(db).selectFrom('messages').select('state').where('tracking_id', '=', trackingId).executeTakeFirst())?.state;

export const deliveryOf = (db: Kysely<CoreTables>, id: string) => tables(db).selectFrom('deliveries').selectAll().where('id', '=', id).executeTakeFirst();

export const eventsOf = (db: Kysely<CoreTables>, where: { envId?: string; trackingId?: string } = {}) => {
  let q = tables(db).selectFrom('delivery_events').selectAll();
  if (where.envId) q = q.where('env_id', '=', where.envId);
  if (where.trackingId) q = q.where('tracking_id', '=', where.trackingId);
  return q.orderBy('env_id').orderBy('id').execute();
};

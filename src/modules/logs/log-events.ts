import type { Selectable } from 'kysely';
import { invalid } from '../../errors.js';
import type { DeliveryEventsTable } from '../delivery/delivery.tables.js';
import { SEND_CHANNELS } from '../sending/channels.js';

/** One entry of GET /logs (the pingram SDK's `GetLogsResponseMessagesInner`). */
export interface LogEvent {
  trackingId: string;
  /** `<CHANNEL>_<STATE>` for a delivery (EMAIL_SENT, SMS_DELIVERED, ...), `MESSAGE_<STATE>` for the message itself. */
  eventType: string;
  timestamp: string;
  epochMs: number;
  /** Failure code of a transition into failed. */
  code?: string;
}

const CHANNEL_OF_LOG = new Map<string, string>(SEND_CHANNELS.map((c) => [c.log, c.channel]));

export function toLogEvent(row: Selectable<DeliveryEventsTable>): LogEvent {
  const subject = row.kind === 'delivery' && row.channel ? (CHANNEL_OF_LOG.get(row.channel) ?? row.channel.toUpperCase()) : 'MESSAGE';
  return {
    trackingId: row.tracking_id,
    eventType: `${subject}_${row.to_state.toUpperCase()}`,
    timestamp: row.at,
    epochMs: new Date(row.at).getTime(),
    ...(row.code ? { code: row.code } : {}),
  };
}

/**
 * The cursor of GET /logs: the id of the last event of a page (events are numbered per
 * environment in commit order, so a page never shifts when new events arrive).
 */
export function encodeCursor(id: number): string {
  return Buffer.from(`e${id}`).toString('base64url');
}

export function decodeCursor(cursor: string | undefined): number | null {
  if (cursor === undefined || cursor === '') return null;
  const text = Buffer.from(cursor, 'base64url').toString();
  const id = /^e(\d{1,15})$/.exec(text)?.[1];
  if (!id) throw invalid('cursor is not one this server gave out.', 'Pass the nextCursor of the previous page, or no cursor for the newest events.');
  return Number(id);
}

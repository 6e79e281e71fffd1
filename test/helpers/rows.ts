import { acceptedMessageRow } from '../../src/modules/sending/message-rows.js';
import type { MessageRow } from '../../src/modules/sending/sending.tables.js';

/**
 * A message row as the intake stores an immediate send: queued, no job, no schedule, nothing
 * processed or failed. Tests name what their case is about; every other column is null.
 */
export function queuedMessageRow(
  fields: Partial<MessageRow> & Pick<MessageRow, 'tracking_id' | 'account_id' | 'env_id' | 'notification_id' | 'user_id' | 'request' | 'received_at'>,
): MessageRow {
  // The intake's own shape (acceptedMessageRow), then whatever else the case names.
  return { ...acceptedMessageRow({ template_id: null, sub_notification_id: null, state: 'queued', ip: null, agent: null, scheduled_for: null, ...fields }), ...fields };
}

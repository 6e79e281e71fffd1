import type { MessageRow } from '../../src/modules/sending/sending.tables.js';

/**
 * A message row as the intake stores an immediate send: queued, no job, no schedule, nothing
 * processed or failed. Tests name what their case is about; every other column is null.
 */
export function queuedMessageRow(
  fields: Partial<MessageRow> & Pick<MessageRow, 'tracking_id' | 'account_id' | 'env_id' | 'notification_id' | 'user_id' | 'request' | 'received_at'>,
): MessageRow {
  return {
    user_email: null,
    user_number: null,
    template_id: null,
    sub_notification_id: null,
    state: 'queued',
    job_id: null,
    ip: null,
    agent: null,
    processed_at: null,
    scheduled_for: null,
    schedule_updated_at: null,
    schedule_updated_to: null,
    schedule_deleted_at: null,
    failed_at: null,
    failed_code: null,
    failed_internal: null,
    skipped: null,
    ...fields,
  };
}

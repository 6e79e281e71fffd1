import type { MessageRow } from './sending.tables.js';

/** What an accepted send decides of its message row; the rest starts empty. */
export type AcceptedMessage = Pick<
  MessageRow,
  'tracking_id' | 'account_id' | 'env_id' | 'notification_id' | 'user_id' | 'template_id' | 'sub_notification_id' | 'request' | 'state' | 'ip' | 'agent' | 'received_at' | 'scheduled_for'
>;

/**
 * The message row of an accepted send, as the intake writes it: one shape for every way a
 * message is accepted (POST /send and the older sender route, a digest's own message). Written
 * out field by field (no spread of a defaults object): it is built once per accepted send.
 */
export function acceptedMessageRow(m: AcceptedMessage): MessageRow {
  return {
    tracking_id: m.tracking_id,
    account_id: m.account_id,
    env_id: m.env_id,
    notification_id: m.notification_id,
    user_id: m.user_id,
    user_email: null,
    user_number: null,
    template_id: m.template_id,
    sub_notification_id: m.sub_notification_id,
    request: m.request,
    state: m.state,
    job_id: null,
    ip: m.ip,
    agent: m.agent,
    received_at: m.received_at,
    processed_at: null,
    scheduled_for: m.scheduled_for,
    schedule_updated_at: null,
    schedule_updated_to: null,
    schedule_deleted_at: null,
    failed_at: null,
    failed_code: null,
    failed_internal: null,
    skipped: null,
  };
}

/** What the service sends of its own accord (a digest, a broadcast recipient) names of its message. */
export type InternalMessage = Pick<MessageRow, 'tracking_id' | 'account_id' | 'env_id' | 'notification_id' | 'user_id' | 'request' | 'received_at'>;

/** The queued message row of a send the service makes itself: no template, sub-notification, schedule or caller (ip, agent). */
export function internalMessageRow(m: InternalMessage): MessageRow {
  return acceptedMessageRow({ ...m, template_id: null, sub_notification_id: null, state: 'queued', ip: null, agent: null, scheduled_for: null });
}

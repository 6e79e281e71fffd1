// How a handed-over broadcast recipient's state follows its message and email delivery
// (RecipientTracking's projection of the ledger's rows).
import { describe, expect, it } from 'vitest';
import type { TrackedRecipient } from '../../src/modules/broadcasts/recipient-delivery.repository.js';
import { derive } from '../../src/modules/broadcasts/recipient-tracking.js';

const AT = '2026-05-04T07:00:00.000Z';
const LATER = '2026-05-04T08:00:00.000Z';

function tracked(fields: Partial<TrackedRecipient> = {}): TrackedRecipient {
  return {
    seq: 1,
    state: 'pending',
    sent_at: null,
    delivered_at: null,
    failed_at: null,
    bounced_at: null,
    opened_at: null,
    clicked_at: null,
    unsubscribed_at: null,
    skip_reason: null,
    message_state: 'processed',
    message_failed_at: null,
    message_skipped: null,
    delivery_status: 'pending',
    delivery_sent_at: null,
    delivery_delivered_at: null,
    delivery_failed_at: null,
    delivery_failed_code: null,
    delivery_routing_reason: null,
    delivery_extra: null,
    ...fields,
  };
}

describe('a broadcast recipient derived from its delivery', () => {
  it('stays pending while its message is queued or its delivery pending (nothing to write)', () => {
    expect(derive(tracked({ message_state: null, delivery_status: null }))).toBeNull();
    expect(derive(tracked({ message_state: 'queued', delivery_status: null }))).toBeNull();
    expect(derive(tracked())).toBeNull();
  });

  it('is delivered once the server accepted it (SMTP 250: sent and delivered at once)', () => {
    expect(derive(tracked({ delivery_status: 'sent', delivery_sent_at: AT }))).toEqual({ state: 'delivered', sent_at: AT, delivered_at: AT, opened_at: null, clicked_at: null, unsubscribed_at: null });
  });

  it('follows opens, clicks and unsubscribes from the log fields; a click counts as an open', () => {
    const extra = (fields: Record<string, string>) => JSON.stringify({ email_sent_message_id: '<x@y>', ...fields });
    expect(derive(tracked({ state: 'delivered', sent_at: AT, delivered_at: AT, delivery_status: 'sent', delivery_sent_at: AT, delivery_extra: extra({ email_opened_at: LATER }) }))).toMatchObject({ state: 'opened', opened_at: LATER });
    expect(derive(tracked({ delivery_status: 'sent', delivery_sent_at: AT, delivery_extra: extra({ email_clicked_at: LATER }) }))).toMatchObject({ state: 'clicked', opened_at: LATER, clicked_at: LATER });
    expect(derive(tracked({ delivery_status: 'sent', delivery_sent_at: AT, delivery_extra: extra({ email_opened_at: AT, email_unsubscribed_at: LATER }) }))).toMatchObject({ state: 'unsubscribed', unsubscribed_at: LATER });
  });

  it('is bounced when the address was refused for good, failed for any other failure', () => {
    expect(derive(tracked({ delivery_status: 'failed', delivery_failed_at: AT, delivery_failed_code: 'SMTP_RECIPIENT_REJECTED' }))).toEqual({ state: 'bounced', bounced_at: AT });
    expect(derive(tracked({ delivery_status: 'failed', delivery_failed_at: AT, delivery_failed_code: 'SMTP_INVALID_ADDRESS' }))).toEqual({ state: 'bounced', bounced_at: AT });
    expect(derive(tracked({ delivery_status: 'failed', delivery_failed_at: AT, delivery_failed_code: 'SMTP_RECIPIENT_DEFERRED' }))).toEqual({ state: 'failed', failed_at: AT });
    expect(derive(tracked({ message_state: 'failed', message_failed_at: AT, delivery_status: null }))).toEqual({ state: 'failed', failed_at: AT });
  });

  it('is skipped when routing skipped its email after the freeze, with why', () => {
    expect(derive(tracked({ delivery_status: 'skipped', delivery_routing_reason: 'USER_UNSUBSCRIBED' }))).toEqual({ state: 'skipped', skip_reason: 'UNSUBSCRIBED' });
    expect(derive(tracked({ delivery_status: null, message_skipped: JSON.stringify({ email: 'NO_EMAIL' }) }))).toEqual({ state: 'skipped', skip_reason: 'NO_EMAIL' });
    expect(derive(tracked({ delivery_status: null, message_skipped: JSON.stringify({ email: 'USER_SUPPRESSED' }) }))).toEqual({ state: 'skipped', skip_reason: 'SUPPRESSED' });
  });

  it('writes nothing when the recipient already holds what its delivery says', () => {
    expect(derive(tracked({ state: 'delivered', sent_at: AT, delivered_at: AT, delivery_status: 'sent', delivery_sent_at: AT }))).toBeNull();
  });
});

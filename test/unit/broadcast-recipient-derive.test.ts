// How a handed-over broadcast recipient's state follows its message and email delivery
// (RecipientTracking's projection of the ledger's rows).
import { describe, expect, it } from 'vitest';
import type { TrackedRecipient } from '../../src/modules/broadcasts/recipient-delivery.repository.js';
import { type RecipientUpdate, derive, walkPages } from '../../src/modules/broadcasts/recipient-tracking.js';

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

describe('walking the pages of recipients to sync', () => {
  /** Recipients 1..n, those in `settled` with a delivery that ended; pages of `size` read from them. */
  function recipients(n: number, settled: number[]) {
    const rows = Array.from({ length: n }, (_, i) =>
      tracked({ seq: i + 1, ...(settled.includes(i + 1) ? { delivery_status: 'sent', delivery_sent_at: AT, delivery_delivered_at: AT } : {}) }),
    );
    const reads: number[] = [];
    const read = async (after: number, size: number) => {
      reads.push(after);
      return rows.filter((r) => r.seq > after).slice(0, size);
    };
    return { reads, read };
  }

  it('stops, in flight, after the first page in which nobody moved on; the settled pages before it are written', async () => {
    // Pages of 3: [1 2 3] all settled, [4 5 6] one settled, [7 8 9] none (the in-flight front), [10 11 12] one settled out of order.
    const { reads, read } = recipients(12, [1, 2, 3, 5, 11]);
    const written: number[][] = [];
    const changed = await walkPages((after) => read(after, 3), async (updates) => void written.push(updates.map((u) => u.seq)), { pageSize: 3, maxPages: Infinity, untilUnchanged: true });
    expect(written).toEqual([[1, 2, 3], [5]]);
    expect(changed).toBe(4);
    expect(reads).toEqual([0, 3, 6]);
  });

  it('reads every page when asked to sync in full (counts and lists), and stops at the last or at maxPages', async () => {
    const { reads, read } = recipients(12, [1, 2, 3, 5, 11]);
    const written: number[] = [];
    const write = async (updates: RecipientUpdate[]) => void written.push(...updates.map((u) => u.seq));
    expect(await walkPages((after) => read(after, 3), write, { pageSize: 3, maxPages: Infinity, untilUnchanged: false })).toBe(5);
    expect(written).toEqual([1, 2, 3, 5, 11]);
    expect(reads).toEqual([0, 3, 6, 9, 12]);
    const limited = recipients(12, [7]);
    expect(await walkPages((after) => limited.read(after, 3), async () => undefined, { pageSize: 3, maxPages: 2, untilUnchanged: false })).toBe(0);
    expect(limited.reads).toEqual([0, 3]);
  });
});

// The pure parts of the send gates: window ends on the UTC calendar, throttle keys by scope, and
// the content fingerprint (who and when are not content; aliases and key order do not matter).
import { describe, expect, it } from 'vitest';
import { FOREVER_END, contentFingerprint, throttleKey, windowEnd } from '../../src/modules/sending/send-gates.js';

const at = new Date('2026-01-31T10:00:00.000Z');
const t = (period: number, unit: string, forever = false) => ({ period, unit, forever, max: 1, scope: ['userId'] });

describe('send gates', () => {
  it('ends a window after its period, months and years on the calendar with the day clamped', () => {
    expect(windowEnd(at, t(90, 'seconds'))).toBe('2026-01-31T10:01:30.000Z');
    expect(windowEnd(at, t(2, 'hours'))).toBe('2026-01-31T12:00:00.000Z');
    expect(windowEnd(at, t(1, 'days'))).toBe('2026-02-01T10:00:00.000Z');
    expect(windowEnd(at, t(1, 'months'))).toBe('2026-02-28T10:00:00.000Z');
    expect(windowEnd(at, t(13, 'months'))).toBe('2027-02-28T10:00:00.000Z');
    expect(windowEnd(new Date('2028-02-29T00:00:00.000Z'), t(1, 'years'))).toBe('2029-02-28T00:00:00.000Z');
    expect(windowEnd(at, t(0, 'seconds', true))).toBe(FOREVER_END);
  });

  it('keys a throttle per user only when the scope names userId, and per window length', () => {
    expect(throttleKey('alerts', 'ada', t(1, 'hours'))).toBe(JSON.stringify(['alerts', 'ada', '1 hours']));
    expect(throttleKey('alerts', 'ada', { ...t(1, 'hours'), scope: ['notificationId'] })).toBe(throttleKey('alerts', 'bob', { ...t(1, 'hours'), scope: ['notificationId'] }));
    expect(throttleKey('alerts', 'ada', t(1, 'hours'))).not.toBe(throttleKey('alerts', 'ada', t(2, 'hours')));
    expect(throttleKey('alerts', 'ada', t(1, 'hours', true))).toBe(JSON.stringify(['alerts', 'ada', 'forever']));
  });

  it('fingerprints type, user and content, not the contact details, the schedule, aliases or key order', () => {
    const base = contentFingerprint('shipped', 'ada', { type: 'shipped', to: { id: 'ada' }, inapp: { title: 'Hi', url: 'u' }, parameters: { a: 1, b: 2 } });
    expect(contentFingerprint('shipped', 'ada', { notificationId: 'shipped', user: { id: 'ada', email: 'a@example.com' }, schedule: '2026-01-01T00:00:00Z', inapp: { url: 'u', title: 'Hi' }, mergeTags: { b: 2, a: 1 } })).toBe(base);
    expect(contentFingerprint('shipped', 'bob', { type: 'shipped', to: { id: 'bob' }, inapp: { title: 'Hi', url: 'u' }, parameters: { a: 1, b: 2 } })).not.toBe(base);
    expect(contentFingerprint('other', 'ada', { type: 'other', to: { id: 'ada' }, inapp: { title: 'Hi', url: 'u' }, parameters: { a: 1, b: 2 } })).not.toBe(base);
    expect(contentFingerprint('shipped', 'ada', { type: 'shipped', to: { id: 'ada' }, inapp: { title: 'Hi!', url: 'u' }, parameters: { a: 1, b: 2 } })).not.toBe(base);
    expect(contentFingerprint('shipped', 'ada', { type: 'shipped', to: { id: 'ada' }, inapp: { title: 'Hi', url: 'u' }, parameters: { a: 1, b: 2 }, subNotificationId: 'p1' })).not.toBe(base);
  });
});

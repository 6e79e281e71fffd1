// When digests are due: every option, in several zones, across both DST changes of New York.
// Pure (Intl.DateTimeFormat over the runtime's IANA data), so no clock is involved.
import { describe, expect, it } from 'vitest';
import { type DigestSchedule, instantOf, nextDigestDue, scheduleOf, zoneOrUtc } from '../../src/modules/digests/digest-schedule.js';

const due = (schedule: Partial<DigestSchedule> & Pick<DigestSchedule, 'option'>, zone: string, after: string) =>
  nextDigestDue({ hour: '09:00', day: 'Monday', date: 'first', ...schedule }, zone, new Date(after)).toISOString();

describe('digest due times', () => {
  it('daily: the next chosen hour in the zone, on either side of the March DST change', () => {
    // 7 March 2026 is a Saturday in EST (UTC-5); clocks go forward at 02:00 on Sunday 8 March.
    expect(due({ option: 'daily' }, 'America/New_York', '2026-03-07T13:00:00Z')).toBe('2026-03-07T14:00:00.000Z');
    expect(due({ option: 'daily' }, 'America/New_York', '2026-03-07T14:00:00Z')).toBe('2026-03-08T13:00:00.000Z');
    expect(due({ option: 'daily' }, 'America/New_York', '2026-03-08T13:00:00Z')).toBe('2026-03-09T13:00:00.000Z');
    // November: back to EST on Sunday 1 November 2026.
    expect(due({ option: 'daily' }, 'America/New_York', '2026-10-31T13:00:00Z')).toBe('2026-11-01T14:00:00.000Z');
    // Late in the local evening the next 09:00 is tomorrow's, though UTC already is tomorrow.
    expect(due({ option: 'daily', hour: '23:30' }, 'America/New_York', '2026-03-10T03:00:00Z')).toBe('2026-03-10T03:30:00.000Z');
    expect(due({ option: 'daily', hour: '00:15' }, 'UTC', '2026-03-10T00:15:00Z')).toBe('2026-03-11T00:15:00.000Z');
  });

  it('a wall time the spring-forward skips is taken after the shift; a repeated one at its first occurrence', () => {
    // 02:30 does not exist in New York on 8 March 2026: 03:30 EDT (07:30Z).
    expect(due({ option: 'daily', hour: '02:30' }, 'America/New_York', '2026-03-07T08:00:00Z')).toBe('2026-03-08T07:30:00.000Z');
    // 01:30 happens twice on 1 November 2026: the first, EDT (05:30Z).
    expect(due({ option: 'daily', hour: '01:30' }, 'America/New_York', '2026-10-31T06:00:00Z')).toBe('2026-11-01T05:30:00.000Z');
    expect(instantOf({ year: 2026, month: 3, day: 8, hour: 9, minute: 0 }, 'America/New_York')).toBe(Date.parse('2026-03-08T13:00:00Z'));
  });

  it('hourly: the next top of a local hour (half-hour zones at :30 UTC)', () => {
    expect(due({ option: 'hourly' }, 'UTC', '2026-03-07T13:20:00Z')).toBe('2026-03-07T14:00:00.000Z');
    expect(due({ option: 'hourly' }, 'UTC', '2026-03-07T14:00:00Z')).toBe('2026-03-07T15:00:00.000Z');
    expect(due({ option: 'hourly' }, 'Asia/Kolkata', '2026-03-07T13:20:00Z')).toBe('2026-03-07T13:30:00.000Z');
    expect(due({ option: 'hourly' }, 'Asia/Kathmandu', '2026-03-07T13:20:00Z')).toBe('2026-03-07T14:15:00.000Z');
  });

  it('weekly: the chosen weekday and hour, this week or next', () => {
    // Friday 6 March 2026, 10:00 in Berlin (CET, UTC+1).
    expect(due({ option: 'weekly', day: 'Friday', hour: '18:00' }, 'Europe/Berlin', '2026-03-06T09:00:00Z')).toBe('2026-03-06T17:00:00.000Z');
    expect(due({ option: 'weekly', day: 'friday', hour: '08:00' }, 'Europe/Berlin', '2026-03-06T09:00:00Z')).toBe('2026-03-13T07:00:00.000Z');
    expect(due({ option: 'weekly', day: 'Monday' }, 'Europe/Berlin', '2026-03-06T09:00:00Z')).toBe('2026-03-09T08:00:00.000Z');
    // Across Berlin's change on 29 March: Monday 30 March 09:00 CEST is 07:00Z.
    expect(due({ option: 'weekly', day: 'Monday' }, 'Europe/Berlin', '2026-03-23T08:00:00Z')).toBe('2026-03-30T07:00:00.000Z');
  });

  it('monthly: the first or last day of the month at the chosen hour', () => {
    expect(due({ option: 'monthly', date: 'first' }, 'UTC', '2026-01-15T00:00:00Z')).toBe('2026-02-01T09:00:00.000Z');
    expect(due({ option: 'monthly', date: 'last' }, 'UTC', '2026-02-15T00:00:00Z')).toBe('2026-02-28T09:00:00.000Z');
    expect(due({ option: 'monthly', date: 'last' }, 'UTC', '2026-02-28T10:00:00Z')).toBe('2026-03-31T09:00:00.000Z');
    expect(due({ option: 'monthly', date: 'last' }, 'UTC', '2028-02-01T10:00:00Z')).toBe('2028-02-29T09:00:00.000Z');
    // December rolls into January of the next year; Sydney is UTC+11 in summer.
    expect(due({ option: 'monthly', date: 'first', hour: '08:00' }, 'Australia/Sydney', '2026-12-05T00:00:00Z')).toBe('2026-12-31T21:00:00.000Z');
  });

  it('reads hour, day and date from the type, with defaults; unknown zones are UTC', () => {
    expect(scheduleOf({ defaultDeliveryOption: 'weekly', weekly: { enabled: true, hour: '07:45', day: 'Sunday' } }, 'weekly')).toEqual({ option: 'weekly', hour: '07:45', day: 'Sunday', date: 'first' });
    expect(scheduleOf(undefined, 'monthly')).toEqual({ option: 'monthly', hour: '09:00', day: 'Monday', date: 'first' });
    expect(zoneOrUtc('Mars/Olympus')).toBe('UTC');
    expect(zoneOrUtc(null)).toBe('UTC');
    expect(zoneOrUtc('Asia/Tokyo')).toBe('Asia/Tokyo');
  });
});

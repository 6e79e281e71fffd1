/**
 * When a digest is due: the next time, strictly after a moment, that a delivery option's chosen
 * wall-clock time occurs in the user's time zone. Pure functions over Intl.DateTimeFormat (the
 * IANA database Node ships with ICU): no time zone library is needed for "which instant is
 * 09:00 on 8 March in America/New_York", and the zone rules stay those of the runtime.
 *
 * DST: a local time that does not exist (skipped by a spring-forward, 02:30 in New York on the
 * second Sunday of March) is taken as the same wall time after the shift (03:30 EDT); one that
 * occurs twice (a fall-back) as its first occurrence.
 */
import type { ChannelOptions, DigestOption } from '../types/delivery-options.js';

/** A digest option's settings from the type (`options.<CHANNEL>.<option>`), defaults filled in. */
export interface DigestSchedule {
  option: DigestOption;
  /** HH:MM, 24-hour clock (daily, weekly, monthly); unused for hourly. */
  hour: string;
  /** English weekday (weekly). */
  day: string;
  /** first | last day of the month (monthly). */
  date: 'first' | 'last';
}

export const DEFAULT_DIGEST_HOUR = '09:00';
export const DEFAULT_DIGEST_DAY = 'Monday';
export const DEFAULT_DIGEST_DATE = 'first';

/** The schedule of `option` on a channel of a type: its `hour`, `day` and `date`, or the defaults (09:00, Monday, first). */
export function scheduleOf(options: ChannelOptions | undefined, option: DigestOption): DigestSchedule {
  const entry = (options?.[option] ?? {}) as { hour?: string; day?: string; date?: 'first' | 'last' };
  return { option, hour: entry.hour ?? DEFAULT_DIGEST_HOUR, day: entry.day ?? DEFAULT_DIGEST_DAY, date: entry.date ?? DEFAULT_DIGEST_DATE };
}

const WEEKDAYS = ['sunday', 'monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday'];

/** Local wall-clock fields of an instant in a zone (month 1-12, weekday 0 = Sunday). */
interface Local {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
}

const formats = new Map<string, Intl.DateTimeFormat>();

/** The zone when Intl knows it, else UTC (a user's timezone is free text until validated). */
export function zoneOrUtc(timezone: string | null | undefined): string {
  if (!timezone) return 'UTC';
  try {
    formatter(timezone);
    return timezone;
  } catch {
    return 'UTC';
  }
}

function formatter(zone: string): Intl.DateTimeFormat {
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(zone, format);
  }
  return format;
}

/** The wall clock of `instant` in `zone`. */
function localOf(instant: number, zone: string): Local & { second: number } {
  const parts: Record<string, number> = {};
  for (const part of formatter(zone).formatToParts(new Date(instant))) if (part.type !== 'literal') parts[part.type] = Number(part.value);
  return { year: parts.year, month: parts.month, day: parts.day, hour: parts.hour, minute: parts.minute, second: parts.second };
}

/** How far `zone` is ahead of UTC at `instant`, in ms. */
function offsetAt(instant: number, zone: string): number {
  const l = localOf(instant, zone);
  const asUtc = Date.UTC(l.year, l.month - 1, l.day, l.hour, l.minute, l.second);
  return asUtc - Math.floor(instant / 1000) * 1000;
}

/**
 * The instant a wall-clock time occurs in `zone` (fields may overflow: day 32 is the next month's
 * first). Two offsets are tried, the one before and the one after a shift near that time.
 */
export function instantOf(local: Local, zone: string): number {
  const wall = Date.UTC(local.year, local.month - 1, local.day, local.hour, local.minute);
  const candidates = new Set([wall - offsetAt(wall, zone), wall - offsetAt(wall - offsetAt(wall, zone), zone)]);
  // The earliest instant that shows this wall time (the first of a fall-back's two).
  const exact = [...candidates].filter((t) => wallOf(t, zone) === wall).sort((a, b) => a - b);
  if (exact.length > 0) return exact[0];
  // Skipped by a spring-forward: the same wall time read with the offset from before the shift,
  // which lands after it (02:30 EST is 03:30 EDT).
  return wall - offsetAt(wall - 86_400_000, zone);
}

/** An instant's wall time in `zone`, as the UTC ms of those fields (minutes precision). */
function wallOf(instant: number, zone: string): number {
  const l = localOf(instant, zone);
  return Date.UTC(l.year, l.month - 1, l.day, l.hour, l.minute);
}

function parseHour(hour: string): { hour: number; minute: number } {
  const [h, m] = hour.split(':').map(Number);
  return { hour: h, minute: m };
}

/** The next instant strictly after `after` at which a digest with `schedule` is due for a user in `zone`. */
export function nextDigestDue(schedule: DigestSchedule, zone: string, after: Date): Date {
  const now = after.getTime();
  const today = localOf(now, zone);
  const { hour, minute } = parseHour(schedule.hour);
  const first = (candidate: (step: number) => Local): Date => {
    for (let step = 0; ; step++) {
      const at = instantOf(candidate(step), zone);
      if (at > now) return new Date(at);
    }
  };
  switch (schedule.option) {
    case 'hourly':
      // The next top of a local hour (zones a half hour off UTC have theirs at :30 UTC).
      return first((step) => ({ ...today, hour: today.hour + step, minute: 0 }));
    case 'daily':
      return first((step) => ({ ...today, day: today.day + step, hour, minute }));
    case 'weekly': {
      const weekday = new Date(Date.UTC(today.year, today.month - 1, today.day)).getUTCDay();
      const ahead = (WEEKDAYS.indexOf(schedule.day.toLowerCase()) - weekday + 7) % 7;
      return first((step) => ({ ...today, day: today.day + ahead + 7 * step, hour, minute }));
    }
    case 'monthly':
      return first((step) => {
        const month = today.month + step;
        // Day 0 of the following month is this month's last day.
        const day = schedule.date === 'last' ? new Date(Date.UTC(today.year, month, 0)).getUTCDate() : 1;
        const normalized = new Date(Date.UTC(today.year, month - 1, 1));
        return { year: normalized.getUTCFullYear(), month: normalized.getUTCMonth() + 1, day, hour, minute };
      });
  }
}

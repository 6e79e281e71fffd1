/**
 * The retry schedule of a webhook delivery (docs/webhooks.md): after the first attempt fails,
 * retries wait these delays, each with +-20% jitter so that endpoints that failed together do
 * not come back together. 10 attempts in all over about a day (23 h 43 min before jitter); the
 * first retry comes 24-36 s after the first failure.
 */
export const RETRY_DELAYS_MS = [
  30_000, // 30 s
  120_000, // 2 min
  600_000, // 10 min
  1_800_000, // 30 min
  3_600_000, // 1 h
  7_200_000, // 2 h
  14_400_000, // 4 h
  28_800_000, // 8 h
  28_800_000, // 8 h
] as const;

export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
export const JITTER = 0.2;
/** A Retry-After longer than this is cut to it. */
export const MAX_RETRY_AFTER_MS = 24 * 3600_000;
/** An endpoint failing this long (with no success in between) is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 3600_000;

/**
 * The delay before the next attempt after `roundAttempts` failed ones in this round, or null
 * when the schedule is spent. A Retry-After the endpoint sent (ms) replaces the scheduled delay
 * (at least 1 s, at most a day), so an endpoint asking for time gets exactly that.
 */
export function nextDelayMs(roundAttempts: number, retryAfterMs: number | null, random: () => number = Math.random): number | null {
  if (roundAttempts >= MAX_ATTEMPTS) return null;
  if (retryAfterMs !== null) return Math.min(Math.max(retryAfterMs, 1000), MAX_RETRY_AFTER_MS);
  const base = RETRY_DELAYS_MS[roundAttempts - 1];
  return Math.round(base * (1 - JITTER + 2 * JITTER * random()));
}

const DAY_NAMES = 'Mon|Tue|Wed|Thu|Fri|Sat|Sun';
const LONG_DAY_NAMES = 'Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday';
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = MONTHS.join('|');
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
/** RFC 9110 §5.6.7 IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`. */
const IMF_FIXDATE = new RegExp(`^(?:${DAY_NAMES}), (\\d{2}) (${MONTH}) (\\d{4}) ${TIME} GMT$`);
/** The obsolete rfc850-date: `Sunday, 06-Nov-94 08:49:37 GMT`. */
const RFC850_DATE = new RegExp(`^(?:${LONG_DAY_NAMES}), (\\d{2})-(${MONTH})-(\\d{2}) ${TIME} GMT$`);
/** The obsolete asctime-date: `Sun Nov  6 08:49:37 1994` (a one-digit day after a space). */
const ASCTIME_DATE = new RegExp(`^(?:${DAY_NAMES}) (${MONTH}) (\\d{2}| \\d) ${TIME} (\\d{4})$`);

/**
 * A Retry-After header in ms from `now`; null when absent or not one of the forms RFC 9110
 * §10.2.3 allows: delay-seconds (digits only) or an HTTP-date (IMF-fixdate, or the obsolete
 * rfc850 and asctime forms; names are case-sensitive). Anything else is ignored, so the normal
 * schedule applies: Date.parse would read `-5`, `1.5` or `May 5` as dates in 2001, in the past,
 * and an endpoint answering 429 with one of them would get its 10 attempts within seconds.
 */
export function parseRetryAfter(value: string | string[] | undefined, now: Date): number | null {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = httpDate(text, now);
  return date === null ? null : Math.max(0, date - now.getTime());
}

/** An HTTP-date (RFC 9110 §5.6.7) in ms since the epoch; null when `text` is not one or names no real date. */
function httpDate(text: string, now: Date): number | null {
  let m = IMF_FIXDATE.exec(text);
  if (m) return utc(Number(m[3]), m[2], Number(m[1]), m.slice(4, 7));
  m = RFC850_DATE.exec(text);
  if (m) {
    // A two-digit year that puts the date more than 50 years ahead is the latest past year with
    // those digits (§5.6.7).
    const thisYear = now.getUTCFullYear();
    const year = thisYear - (thisYear % 100) + Number(m[3]);
    const fiftyYearsAhead = new Date(now);
    fiftyYearsAhead.setUTCFullYear(thisYear + 50);
    const at = utc(year, m[2], Number(m[1]), m.slice(4, 7));
    return at !== null && at > fiftyYearsAhead.getTime() ? utc(year - 100, m[2], Number(m[1]), m.slice(4, 7)) : at;
  }
  m = ASCTIME_DATE.exec(text);
  if (m) return utc(Number(m[6]), m[1], Number(m[2].trim()), m.slice(3, 6));
  return null;
}

/** The instant of a parsed date and time of day, or null when they are out of range (31 Feb, 25:00). */
function utc(year: number, monthName: string, day: number, [hour, minute, second]: string[]): number | null {
  const month = MONTHS.indexOf(monthName);
  const [h, min, s] = [Number(hour), Number(minute), Number(second)];
  // 60: a leap second (§5.6.7 allows it in the syntax).
  if (day < 1 || h > 23 || min > 59 || s > 60) return null;
  const at = Date.UTC(year, month, day, h, min, s);
  const date = new Date(at);
  return date.getUTCFullYear() === year && date.getUTCMonth() === month && date.getUTCDate() === day ? at : null;
}

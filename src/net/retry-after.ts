// Retry-After (RFC 9110 §10.2.3) as every outbound client of the server reads it.
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
 * and a server answering 429 with one of them would be retried at once, again and again. One
 * reading for every caller: webhooks, web push, FCM and Twilio.
 */
export function retryAfterMs(value: string | string[] | null | undefined, now: Date): number | null {
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

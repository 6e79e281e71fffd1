import { retryAfterMs } from '../../net/retry-after.js';

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

/** A Retry-After header in ms from `now`, read as RFC 9110 has it (src/net/retry-after.ts); null when absent or not one of its forms. */
export function parseRetryAfter(value: string | string[] | undefined, now: Date): number | null {
  return retryAfterMs(value, now);
}

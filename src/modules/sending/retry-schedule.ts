/**
 * When a delivery's next attempt is due after a transient failure.
 *
 * Equal jitter over a growth of 4 per attempt: the wait after attempt n is uniform in
 * [h/2, h] with h = base * 4^(n-1). With the default base of 4 s, the five waits of a delivery's
 * six attempts are 2-4 s, 8-16 s, 32-64 s, 2-4 min and 8.5-17 min: the last attempt comes 11 to
 * 23 minutes after the first. Full jitter over a growth of 2 (the queue's own backoff), as it was,
 * spent all six attempts within 30-60 s: a provider outage of a minute, or a receiving mail
 * server that greylists (451 until the sender comes back after 5 minutes, postgrey's default),
 * failed the delivery for good. The lower half bound keeps every wait at least half its step, so
 * that no run of small draws brings the attempts back together.
 */
export function deliveryRetryDelay(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const high = baseMs * 4 ** Math.min(Math.max(attempt - 1, 0), 20);
  return Math.floor(high / 2 + random() * (high / 2));
}

/** Default base of deliveryRetryDelay. */
export const DELIVERY_RETRY_BASE_MS = 4_000;

/**
 * The longest a provider's Retry-After may put a delivery off. A provider that answers
 * `Retry-After: 999999999` (about 32 years) would otherwise leave it pending until then.
 */
export const MAX_PROVIDER_RETRY_AFTER_MS = 60 * 60_000;

/** The wait before the next attempt: the provider's Retry-After (at most an hour) when it gave one, else deliveryRetryDelay. */
export function retryDelayAfter(attempt: number, providerRetryAfterMs: number | undefined, baseMs: number, random?: () => number): number {
  if (providerRetryAfterMs !== undefined) return Math.min(Math.max(0, providerRetryAfterMs), MAX_PROVIDER_RETRY_AFTER_MS);
  return deliveryRetryDelay(attempt, baseMs, random);
}

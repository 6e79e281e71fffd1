import { describe, expect, it } from 'vitest';
import { DELIVERY_RETRY_BASE_MS, MAX_PROVIDER_RETRY_AFTER_MS, deliveryRetryDelay, retryDelayAfter } from '../../src/modules/sending/retry-schedule.js';
import { MAX_DELIVERY_ATTEMPTS } from '../../src/modules/sending/delivery-runs.js';

const MINUTE = 60_000;
/** The waits between a delivery's attempts when every draw is `draw`. */
const waits = (draw: number) => Array.from({ length: MAX_DELIVERY_ATTEMPTS - 1 }, (_, i) => deliveryRetryDelay(i + 1, DELIVERY_RETRY_BASE_MS, () => draw));
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

describe('delivery retry schedule', () => {
  it('keeps each wait within half to all of its step, growing fourfold', () => {
    expect(waits(0)).toEqual([2_000, 8_000, 32_000, 128_000, 512_000]);
    expect(waits(0.999999).map((ms) => Math.round(ms / 1000))).toEqual([4, 16, 64, 256, 1024]);
  });

  it('spreads the attempts over more than a greylisting delay (5 minutes) and at most about 23 minutes', () => {
    expect(sum(waits(0))).toBeGreaterThan(10 * MINUTE);
    expect(sum(waits(0.999999))).toBeLessThan(23 * MINUTE);
  });

  it("takes the provider's Retry-After, but never more than an hour (nor less than now)", () => {
    expect(retryDelayAfter(2, 30_000, DELIVERY_RETRY_BASE_MS, () => 0)).toBe(30_000);
    expect(retryDelayAfter(2, 999_999_999_000, DELIVERY_RETRY_BASE_MS)).toBe(MAX_PROVIDER_RETRY_AFTER_MS);
    expect(MAX_PROVIDER_RETRY_AFTER_MS).toBe(60 * MINUTE);
    expect(retryDelayAfter(2, -5, DELIVERY_RETRY_BASE_MS)).toBe(0);
    expect(retryDelayAfter(2, undefined, DELIVERY_RETRY_BASE_MS, () => 0)).toBe(8_000);
  });
});

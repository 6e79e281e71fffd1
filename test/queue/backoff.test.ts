import { describe, expect, it } from 'vitest';
import { backoffDelay } from '../../src/queue/index.js';

describe('backoffDelay (exponential, full jitter)', () => {
  it('doubles the ceiling per attempt from the base', () => {
    const top = () => 0.999999;
    expect(backoffDelay(1, { baseMs: 1000 }, top)).toBe(999);
    expect(backoffDelay(2, { baseMs: 1000 }, top)).toBe(1999);
    expect(backoffDelay(5, { baseMs: 1000 }, top)).toBe(15_999);
  });

  it('draws uniformly below the ceiling (zero is possible)', () => {
    expect(backoffDelay(3, { baseMs: 1000 }, () => 0)).toBe(0);
    expect(backoffDelay(3, { baseMs: 1000 }, () => 0.5)).toBe(2000);
    for (let i = 0; i < 200; i++) {
      const d = backoffDelay(4, { baseMs: 100 });
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThan(800);
    }
  });

  it('is capped at about an hour by default, however many attempts', () => {
    expect(backoffDelay(60, {}, () => 1)).toBe(3_600_000);
    expect(backoffDelay(10_000, {}, () => 1)).toBe(3_600_000);
    expect(backoffDelay(30, { baseMs: 10, capMs: 5000 }, () => 1)).toBe(5000);
  });
});

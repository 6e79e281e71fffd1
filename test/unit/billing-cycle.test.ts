import { describe, expect, it } from 'vitest';
import { currentCycleStart } from '../../src/modules/accounts/billing-cycle.js';

describe('billing cycle', () => {
  it('starts on the anniversary day of this month once it has passed', () => {
    expect(currentCycleStart('2025-06-10', new Date('2026-03-10T00:00:00Z'))).toBe('2026-03-10');
    expect(currentCycleStart('2025-06-10', new Date('2026-03-25T12:00:00Z'))).toBe('2026-03-10');
  });
  it('is last month before the anniversary day, across a year boundary', () => {
    expect(currentCycleStart('2025-06-10', new Date('2026-03-09T23:59:59Z'))).toBe('2026-02-10');
    expect(currentCycleStart('2025-06-10', new Date('2026-01-02T00:00:00Z'))).toBe('2025-12-10');
  });
  it('clamps to the last day of short months', () => {
    expect(currentCycleStart('2025-01-31', new Date('2026-02-28T08:00:00Z'))).toBe('2026-02-28');
    expect(currentCycleStart('2025-01-31', new Date('2026-02-27T08:00:00Z'))).toBe('2026-01-31');
    expect(currentCycleStart('2025-01-31', new Date('2026-03-30T08:00:00Z'))).toBe('2026-02-28');
  });
});

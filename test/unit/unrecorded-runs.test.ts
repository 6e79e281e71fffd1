// When a run of a delivery.run job may follow one that left its provider call unrecorded.
import { describe, expect, it } from 'vitest';
import { deliveryJobMissesAttempts } from '../../src/modules/sending/unrecorded-runs.js';

describe('deliveryJobMissesAttempts', () => {
  it('a retry job (priorAttempts 1): run k expects k attempts recorded; fewer means a run before left its call unrecorded', () => {
    expect(deliveryJobMissesAttempts(1, { attempt: 1 }, 1)).toBe(false);
    expect(deliveryJobMissesAttempts(2, { attempt: 2 }, 1)).toBe(false);
    expect(deliveryJobMissesAttempts(1, { attempt: 2 }, 1)).toBe(true);
    // More than expected (another job of the delivery recorded some): nothing of this job's is missing.
    expect(deliveryJobMissesAttempts(3, { attempt: 2 }, 1)).toBe(false);
  });

  it("a hand-over's stand-by job (priorAttempts 1) finding no attempt: the first attempt's process died", () => {
    expect(deliveryJobMissesAttempts(0, { attempt: 1 }, 1)).toBe(true);
  });

  it('a job enqueued before jobs carried priorAttempts: any re-run, or no attempt at all, is taken as one', () => {
    expect(deliveryJobMissesAttempts(2, { attempt: 1 }, undefined)).toBe(false);
    expect(deliveryJobMissesAttempts(2, { attempt: 2 }, undefined)).toBe(true);
    expect(deliveryJobMissesAttempts(0, { attempt: 1 }, undefined)).toBe(true);
  });
});

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IdleTimer } from '../../src/idle-timer.js';

describe('IdleTimer', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires once idleMs after the last idle(), never after a busy() that came since', () => {
    const fired = vi.fn();
    const timer = new IdleTimer(1000, fired);
    timer.idle();
    expect(timer.counting).toBe(true);
    vi.advanceTimersByTime(999);
    timer.busy();
    expect(timer.counting).toBe(false);
    vi.advanceTimersByTime(5000);
    expect(fired).not.toHaveBeenCalled();
    timer.idle();
    vi.advanceTimersByTime(600);
    // idle() again restarts the count.
    timer.idle();
    vi.advanceTimersByTime(999);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledTimes(1);
    expect(timer.counting).toBe(false);
    vi.advanceTimersByTime(10_000);
    expect(fired).toHaveBeenCalledTimes(1);
  });

  it('never fires with idleMs Infinity', () => {
    const fired = vi.fn();
    const timer = new IdleTimer(Number.POSITIVE_INFINITY, fired);
    timer.idle();
    expect(timer.counting).toBe(false);
    vi.advanceTimersByTime(1e9);
    expect(fired).not.toHaveBeenCalled();
  });
});

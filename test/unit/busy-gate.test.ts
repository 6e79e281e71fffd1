import { afterEach, describe, expect, it, vi } from 'vitest';
import { BusyGate } from '../../src/queue/busy-gate.js';

describe('BusyGate', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('allows any number of starts while not busy', () => {
    const gate = new BusyGate(() => false, 0.1, () => {});
    expect(gate.room('a')).toBe(Number.POSITIVE_INFINITY);
    gate.started()();
    expect(gate.room('a')).toBe(Number.POSITIVE_INFINITY);
  });

  it('while busy, spaces starts by cost * (1 - share) / share, learning the cost from finished runs', () => {
    vi.useFakeTimers();
    let now = 1000;
    const reopened: string[][] = [];
    const gate = new BusyGate(() => true, 0.1, (names) => reopened.push(names), () => now);
    expect(gate.room('a')).toBe(1);
    const ended = gate.started();
    // Initial cost 1 ms: the next start waits 9 ms.
    now += 5;
    expect(gate.room('a')).toBe(0);
    expect(gate.room('b')).toBe(0);
    now += 15; // the run took 20 ms
    ended();
    vi.advanceTimersByTime(4);
    expect(reopened).toEqual([['a', 'b']]);
    expect(gate.room('a')).toBe(1);
    gate.started();
    // cost = 0.7 * 1 + 0.3 * 20 = 6.7 ms: the next start waits 60.3 ms.
    now += 60;
    expect(gate.room('a')).toBe(0);
    now += 1;
    expect(gate.room('a')).toBe(1);
    gate.stop();
  });

  it('waits at most 500 ms between starts, so runs waiting on a provider keep moving', () => {
    let now = 0;
    const gate = new BusyGate(() => true, 0.1, () => {}, () => now);
    const ended = gate.started();
    now += 2000; // a run that waited two seconds on the network
    ended();
    gate.started();
    now += 499;
    expect(gate.room('a')).toBe(0);
    now += 1;
    expect(gate.room('a')).toBe(1);
    gate.stop();
  });
});

import { describe, expect, it } from 'vitest';
import { ApiLoad, WorkTime, eventLoopMeter } from '../../src/load.js';

describe('ApiLoad', () => {
  it('is busy from 10 requests in a 100 ms window on a saturated loop, and not once requests stop for 200 ms', () => {
    const load = new ApiLoad(() => 1);
    expect(load.busy(0)).toBe(false);
    for (let i = 0; i < 9; i++) load.requestReceived(i * 5);
    expect(load.busy(50)).toBe(false);
    load.requestReceived(50);
    expect(load.busy(50)).toBe(true);
    // The next window counts the previous one's rate until it has its own.
    load.requestReceived(120);
    expect(load.busy(130)).toBe(true);
    expect(load.busy(319)).toBe(true);
    expect(load.busy(320)).toBe(false);
  });

  it('forgets an old burst: a window long after it starts from nothing', () => {
    const load = new ApiLoad(() => 1);
    for (let i = 0; i < 150; i++) load.requestReceived(i * 0.1);
    load.requestReceived(1000);
    expect(load.busy(1000)).toBe(false);
  });

  it('stays idle under light load (a few requests per window)', () => {
    const load = new ApiLoad(() => 1);
    for (let t = 0; t < 2000; t += 20) load.requestReceived(t);
    expect(load.busy(2000)).toBe(false);
  });

  it('is not busy while the event loop has time to spare, however many requests come in', () => {
    let utilization = 0.5;
    const load = new ApiLoad(() => utilization);
    for (let i = 0; i < 300; i++) load.requestReceived(i);
    expect(load.busy(300)).toBe(false);
    // Saturated from the next window on.
    utilization = 0.97;
    for (let i = 300; i < 450; i++) load.requestReceived(i);
    expect(load.busy(450)).toBe(true);
  });

  it('stays busy through a single window with time to spare, and lets go after three in a row', () => {
    let utilization = 1;
    const load = new ApiLoad(() => utilization);
    let t = 0;
    const windowOfRequests = () => {
      for (let i = 0; i < 50; i++) load.requestReceived(t + i * 2);
      t += 100;
    };
    windowOfRequests();
    windowOfRequests();
    expect(load.busy(t)).toBe(true);
    // Dips under 0.9, each followed by a saturated window: still busy throughout.
    for (let dip = 0; dip < 3; dip++) {
      utilization = 0.86;
      windowOfRequests();
      windowOfRequests();
      expect(load.busy(t)).toBe(true);
      utilization = 1;
      windowOfRequests();
      windowOfRequests();
      expect(load.busy(t)).toBe(true);
    }
    // Time to spare for three windows in a row: the workers may take it.
    utilization = 0.6;
    windowOfRequests();
    windowOfRequests();
    expect(load.busy(t)).toBe(true);
    windowOfRequests();
    windowOfRequests();
    expect(load.busy(t)).toBe(false);
  });

  it('is busy while what the requests wait on is saturated, though the event loop has time to spare', () => {
    let backend = 0.5;
    const load = new ApiLoad(() => 0.2);
    load.measureBackend(() => backend);
    for (let i = 0; i < 300; i++) load.requestReceived(i);
    expect(load.busy(300)).toBe(false);
    backend = 0.95;
    for (let i = 300; i < 450; i++) load.requestReceived(i);
    expect(load.busy(450)).toBe(true);
    // Time to spare there for three windows in a row: not busy any more.
    backend = 0.3;
    for (let i = 450; i < 800; i++) load.requestReceived(i);
    expect(load.busy(800)).toBe(false);
  });

  it('WorkTime measures the share of the time with work under way, overlapping pieces counted once', () => {
    let now = 0;
    const work = new WorkTime(() => now);
    work.begin();
    now = 30;
    work.begin();
    now = 50;
    work.end();
    now = 60;
    work.end();
    now = 100;
    expect(work.meter()).toBeCloseTo(0.6);
    // Work under way when measured counts up to now, and the rest of it in the next window.
    work.begin();
    now = 150;
    expect(work.meter()).toBeCloseTo(1);
    now = 175;
    work.end();
    now = 250;
    expect(work.meter()).toBeCloseTo(0.25);
  });

  it('measures the event loop with eventLoopMeter: near 1 while it is kept busy', () => {
    const meter = eventLoopMeter();
    const began = performance.now();
    while (performance.now() - began < 30) {
      // busy loop
    }
    expect(meter()).toBeGreaterThan(0.9);
  });
});

import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { limitHeapGrowth } from '../../src/heap-settings.js';
import { ROOT } from '../helpers/process.js';

/**
 * In a process of its own (the flag is process-wide): keeps ~25 MB live, collects, then allocates
 * objects that live long enough to be promoted (a ring of 100,000) and prints the most heap used
 * on the way. V8's next full collection comes when the old generation passes the kept size
 * times its growing factor, so the peak follows the factor.
 */
function peakHeapMb(limit: boolean): number {
  const settings = pathToFileURL(path.join(ROOT, 'dist/heap-settings.js')).href;
  const script = `
    const { limitHeapGrowth } = await import(${JSON.stringify(settings)});
    if (${limit}) limitHeapGrowth();
    const kept = Array.from({ length: 100_000 }, (_, i) => ({ i, s: 'x'.repeat(64) + i }));
    globalThis.gc();
    const ring = new Array(100_000);
    let peak = 0;
    for (let i = 0; i < 3_000_000; i++) {
      ring[i % ring.length] = { i, a: [i, i + 1, i + 2], s: 'y' + i };
      if (i % 2000 === 0) peak = Math.max(peak, process.memoryUsage().heapUsed);
    }
    console.log(Math.round(peak / 1048576), kept.length);`;
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
  return Number(out.split(' ')[0]);
}

describe('limitHeapGrowth', () => {
  it('keeps a heap under allocation pressure near what the last full collection kept', () => {
    const unlimited = peakHeapMb(false);
    const limited = peakHeapMb(true);
    // Measured: 146-147 MB without, 79 MB with (25 MB kept, the ring and the young generation on top).
    expect(unlimited).toBeGreaterThan(120);
    expect(limited).toBeLessThan(100);
  }, 60_000);

  it('leaves a factor chosen on the command line alone', () => {
    expect(limitHeapGrowth(['--heap-growing-percent=50'])).toBe(false);
    expect(limitHeapGrowth(['--heap_growing_percent=50'])).toBe(false);
  });
});

/**
 * In a process of its own, started without --expose-gc: promotes ~40 MB of objects to the old
 * generation (they survive the young collections while referenced), drops them, then collects and
 * prints the heap used before and after, and whether `gc` is visible afterwards.
 */
function collectInFreshProcess(nodeFlags: string[] = []): { beforeMb: number; afterMb: number; gcVisible: string } {
  const settings = pathToFileURL(path.join(ROOT, 'dist/heap-settings.js')).href;
  const script = `
    const { collectStartupGarbage } = await import(${JSON.stringify(settings)});
    const { runInNewContext } = await import('node:vm');
    let held = [];
    for (let i = 0; i < 400_000; i++) held.push({ i, s: 'z'.repeat(48) + i });
    await new Promise((resolve) => setTimeout(resolve, 50));
    held = null;
    const before = process.memoryUsage().heapUsed;
    collectStartupGarbage();
    const after = process.memoryUsage().heapUsed;
    console.log(JSON.stringify({ beforeMb: before / 1048576, afterMb: after / 1048576, gcVisible: typeof globalThis.gc + ' ' + runInNewContext('typeof gc') }));`;
  const out = execFileSync(process.execPath, [...nodeFlags, '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
  return JSON.parse(out) as { beforeMb: number; afterMb: number; gcVisible: string };
}

describe('collectStartupGarbage', () => {
  it('frees what the start left unreachable, without leaving a gc function behind', () => {
    const { beforeMb, afterMb, gcVisible } = collectInFreshProcess();
    // The dropped objects take ~40 MB; a full collection frees them all.
    expect(beforeMb - afterMb).toBeGreaterThan(30);
    expect(afterMb).toBeLessThan(20);
    expect(gcVisible).toBe('undefined undefined');
  }, 60_000);

  it('leaves a gc exposed on the command line exposed', () => {
    const { beforeMb, afterMb, gcVisible } = collectInFreshProcess(['--expose-gc']);
    expect(beforeMb - afterMb).toBeGreaterThan(30);
    expect(gcVisible).toBe('function function');
  }, 60_000);
});

/**
 * In a process of its own started with a 16 MB semi-space: a worker thread that asks for a young
 * generation of 8 MB churns through short-lived objects and prints the young generation it got.
 */
function workerYoungGenerationMb(scope: boolean): number {
  const settings = pathToFileURL(path.join(ROOT, 'dist/heap-settings.js')).href;
  const script = `
    const { scopeSemiSpaceFlagToMainThread } = await import(${JSON.stringify(settings)});
    const { Worker } = await import('node:worker_threads');
    if (${scope}) scopeSemiSpaceFlagToMainThread();
    const churn = \`
      const v8 = require('node:v8');
      let keep = [];
      for (let i = 0; i < 2_000_000; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 20_000) keep = []; }
      const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
      require('node:worker_threads').parentPort.postMessage(young.space_size / 1048576);\`;
    const worker = new Worker(churn, { eval: true, execArgv: [], resourceLimits: { maxYoungGenerationSizeMb: 8 } });
    worker.on('message', (mb) => { console.log(mb); worker.terminate(); });`;
  const out = execFileSync(process.execPath, ['--max-semi-space-size=16', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
  return Number(out.trim());
}

describe('scopeSemiSpaceFlagToMainThread', () => {
  it("lets worker threads started later keep the young generation their resourceLimits ask for", () => {
    // Measured: 32 MB (the command line's 16 MB semi-spaces) without, 8 with.
    expect(workerYoungGenerationMb(false)).toBeGreaterThan(16);
    expect(workerYoungGenerationMb(true)).toBeLessThanOrEqual(8);
  }, 60_000);
});

import { describe, expect, it } from 'vitest';
import { Batcher, type Settled } from '../../src/storage/batcher.js';

describe('Batcher (group commit)', () => {
  it('writes units submitted together as one batch, in order, and settles each with its own result', async () => {
    const batches: number[][] = [];
    const batcher = new Batcher<number, number>(async (units) => {
      batches.push(units);
      return units.map((n): Settled<number> => (n === 3 ? { ok: false, error: new Error('three') } : { ok: true, value: n * 10 }));
    }, 10);
    const results = await Promise.allSettled([1, 2, 3, 4].map((n) => batcher.submit(n)));
    expect(batches).toEqual([[1, 2, 3, 4]]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([10, 20, 'three', 40]);
  });

  it('caps a batch at maxBatch and gathers the next while one is written', async () => {
    const batches: number[][] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const batcher = new Batcher<number, number>(async (units) => {
      batches.push(units);
      if (batches.length === 1) await gate;
      return units.map((n) => ({ ok: true, value: n }));
    }, 2);
    const first = [1, 2, 3].map((n) => batcher.submit(n));
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(batcher.load).toBe(3);
    const later = [4, 5].map((n) => batcher.submit(n));
    release();
    await Promise.all([...first, ...later]);
    expect(batches).toEqual([[1, 2], [3, 4], [5]]);
    expect(batcher.load).toBe(0);
  });

  it('is gathering while a batch waits to be written with room left, not while one is written', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const batcher = new Batcher<number, number>(async (units) => {
      await gate;
      return units.map((n) => ({ ok: true, value: n }));
    }, 2);
    expect(batcher.gathering).toBe(false);
    const first = batcher.submit(1);
    expect(batcher.gathering).toBe(true);
    const second = batcher.submit(2);
    expect(batcher.gathering).toBe(false); // full
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    const third = batcher.submit(3);
    expect(batcher.gathering).toBe(false); // waits behind the batch being written
    release();
    await Promise.all([first, second, third]);
    expect(batcher.gathering).toBe(false);
    expect(batcher.load).toBe(0);
  });

  it('with overlap, writes a second batch while one is written once minUnits units wait for it, and no third', async () => {
    const started: number[][] = [];
    const releases: (() => void)[] = [];
    const batcher = new Batcher<number, number>(
      async (units) => {
        started.push(units);
        await new Promise<void>((r) => releases.push(r));
        return units.map((n) => ({ ok: true, value: n }));
      },
      10,
      { writers: 2, minUnits: 3 },
    );
    const turns = async () => {
      for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    };
    const all = [batcher.submit(1)];
    await turns();
    expect(started).toEqual([[1]]);
    // Two waiting: fewer than minUnits, they wait for the batch being written.
    all.push(batcher.submit(2), batcher.submit(3));
    await turns();
    expect(started).toEqual([[1]]);
    // A third: a second batch starts beside the first.
    all.push(batcher.submit(4));
    await turns();
    expect(started).toEqual([[1], [2, 3, 4]]);
    // Two writers under way: however many wait, no third starts.
    all.push(...[5, 6, 7, 8].map((n) => batcher.submit(n)));
    await turns();
    expect(started).toHaveLength(2);
    releases[0]();
    await turns();
    expect(started).toEqual([[1], [2, 3, 4], [5, 6, 7, 8]]);
    releases[1]();
    releases[2]();
    await expect(Promise.all(all)).resolves.toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(batcher.load).toBe(0);
  });

  it('fails every unit of a batch whose write throws, and goes on with the next batch', async () => {
    let calls = 0;
    const batcher = new Batcher<number, number>(async (units) => {
      calls++;
      if (calls === 1) throw new Error('commit failed');
      return units.map((n) => ({ ok: true, value: n }));
    }, 10);
    const failed = await Promise.allSettled([1, 2].map((n) => batcher.submit(n)));
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    await expect(batcher.submit(3)).resolves.toBe(3);
  });
});

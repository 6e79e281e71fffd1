// Batches in a few shapes (src/storage/statement-shapes.ts): every row once, in order, in chunks
// of powers of two; IN lists padded to a power of two with the same set of values.
import { describe, expect, it } from 'vitest';
import { paddedToPowerOfTwo, powerOfTwoChunks } from '../../src/storage/statement-shapes.js';

describe('statement shapes', () => {
  it('cuts rows into chunks of powers of two, largest first, none over the bound', () => {
    const rows = Array.from({ length: 21 }, (_, i) => i);
    const chunks = powerOfTwoChunks(rows, 64);
    expect(chunks.map((c) => c.length)).toEqual([16, 4, 1]);
    expect(chunks.flat()).toEqual(rows);
    expect(powerOfTwoChunks(Array.from({ length: 150 }, (_, i) => i), 64).map((c) => c.length)).toEqual([64, 64, 16, 4, 2]);
    expect(powerOfTwoChunks([], 64)).toEqual([]);
    // Over every size up to 200: a handful of distinct sizes, every row once.
    const sizes = new Set<number>();
    for (let n = 1; n <= 200; n++) {
      const all = Array.from({ length: n }, (_, i) => i);
      const cut = powerOfTwoChunks(all, 64);
      expect(cut.flat()).toEqual(all);
      for (const c of cut) sizes.add(c.length);
    }
    expect([...sizes].sort((a, b) => a - b)).toEqual([1, 2, 4, 8, 16, 32, 64]);
  });

  it('pads a list to a power of two with its last value', () => {
    expect(paddedToPowerOfTwo(['a', 'b', 'c'])).toEqual(['a', 'b', 'c', 'c']);
    expect(paddedToPowerOfTwo(['a', 'b', 'c', 'd'])).toEqual(['a', 'b', 'c', 'd']);
    expect(paddedToPowerOfTwo(['a'])).toEqual(['a']);
    expect(paddedToPowerOfTwo([])).toEqual([]);
    expect(paddedToPowerOfTwo(Array.from({ length: 17 }, (_, i) => i))).toHaveLength(32);
    expect(new Set(paddedToPowerOfTwo(Array.from({ length: 17 }, (_, i) => i)))).toEqual(new Set(Array.from({ length: 17 }, (_, i) => i)));
  });
});

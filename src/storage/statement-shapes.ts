/**
 * Batches in a few shapes, so that the statements of batches of any size have few distinct texts.
 * On SQLite a statement is compiled once per text and kept (storage/db.ts); a multi-row INSERT or
 * an IN list of a length not seen before is compiled anew, a few million instructions for the
 * wide rows of the ledger. Measured: the email worker compiled about 330 statements over 2,000
 * mails, their batches being of every size from 1 to 60, some 18% of its main thread's
 * instructions per mail under callgrind.
 */

/** Rows in chunks whose sizes are powers of two, largest first, none over `max` (21 rows: 16, 4, 1). */
export function powerOfTwoChunks<T>(rows: T[], max: number): T[][] {
  const chunks: T[][] = [];
  let at = 0;
  for (let size = largestPowerOfTwo(max); at < rows.length; ) {
    if (rows.length - at >= size) {
      chunks.push(rows.slice(at, at + size));
      at += size;
    } else size /= 2;
  }
  return chunks;
}

/** The values padded to a power of two by repeating the last one: for an IN list, the same set in one of a few texts. */
export function paddedToPowerOfTwo<T>(values: T[]): T[] {
  if (values.length < 2) return values;
  const size = 2 ** Math.ceil(Math.log2(values.length));
  if (size === values.length) return values;
  const padded = values.slice();
  const last = values[values.length - 1];
  while (padded.length < size) padded.push(last);
  return padded;
}

function largestPowerOfTwo(n: number): number {
  return 2 ** Math.floor(Math.log2(Math.max(1, n)));
}

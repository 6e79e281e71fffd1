import v8 from 'node:v8';

/**
 * How far V8 lets a heap grow past what its last full collection kept, in percent.
 *
 * V8 picks the factor itself (up to 4x) from how fast it collects against how fast the program
 * allocates; a server that allocates steadily and collects fast gets the top factor. Measured on
 * the broadcast bench (10,000 mails, built server): the main thread's heap kept 57 MB after a
 * full collection and then grew to 238 MB before the next one, and the process's peak resident
 * memory was 434 MB; with 30% it stayed under 113 MB and the process peaked at 287 MB, with a few
 * more full collections (3 -> 14 over the run), each on ~60 MB. See docs/memory.md.
 */
export const HEAP_GROWING_PERCENT = 30;

/**
 * Sets V8's heap growing factor for every isolate of the process (the main thread's and the
 * worker threads'), unless whoever started the process chose one (`node --heap-growing-percent=N
 * dist/main.js`; NODE_OPTIONS does not take this flag). V8 reads the flag each time it sets a
 * heap's next limit, so setting it after start applies from the next collection on. Returns
 * whether it set it.
 */
export function limitHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((arg) => /^--heap[-_]growing[-_]percent\b/.test(arg))) return false;
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}

import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';

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

/**
 * The main thread's young generation bound, in MB per semi-space, that the ways the server is
 * started pass on node's command line (`npm start`, the `clarion` bin's shebang, the Dockerfile
 * and compose.yaml; test/unit/start-flags.test.ts keeps them equal to this). V8 lets a
 * semi-space grow to 16 MB (a 32 MB young generation), and the main thread's reached that while
 * the modules load and kept it; V8 reads the flag only when an isolate is created, so the process
 * cannot set it for its main thread at run time (measured: `v8.setFlagsFromString` changes
 * nothing there). Costs and figures: docs/memory.md.
 */
export const MAIN_SEMI_SPACE_MB = 8;

/**
 * Clears `--max-semi-space-size` once the main isolate exists, so that it bounds the main thread
 * only. The flag is process-wide and, while set, overrides the young generation a worker thread
 * asks for in `resourceLimits` (measured: a worker asking for 8 MB got 32 with
 * `--max-semi-space-size=16`); V8 reads it at each isolate's creation, so worker threads started
 * after this call keep their own bounds (the MIME and render threads').
 */
export function scopeSemiSpaceFlagToMainThread(): void {
  v8.setFlagsFromString('--max-semi-space-size=0');
}

/**
 * How long after the server starts its main heap is collected once (collectStartupGarbage). At
 * start V8 sees the high allocation rate of module loading and keeps the heap it grew; collected
 * right after listen, the heap stayed at 103 MB committed, collected 8 s later it fell to 56 MB
 * at once, and to 48 MB when V8's memory reducer followed.
 */
export const STARTUP_COLLECTION_DELAY_MS = 8000;

/**
 * One full collection of the main thread's heap, for a server that has just started. Loading
 * ~2,000 modules and compiling the routes' schemas leaves the heap at twice what it keeps
 * (measured on the built server, SQLite, idle: 108 MB committed for 47 MB live, the young
 * generation grown to its 32 MB maximum by the startup's survivors), and an idle server never
 * collects fully again, so it would hold that memory until its first load: resident memory
 * 187 MB idle, 127 MB once collected. `gc` is not exposed without `--expose-gc`; the flag is set
 * only long enough to take the function from a fresh context and cleared again, so no code the
 * server runs later sees a `gc` global.
 */
export function collectStartupGarbage(execArgv: readonly string[] = process.execArgv): void {
  const exposed = execArgv.some((arg) => /^--expose[-_]gc\b/.test(arg));
  if (!exposed) v8.setFlagsFromString('--expose-gc');
  try {
    const gc = runInNewContext('gc') as () => void;
    gc();
  } finally {
    if (!exposed) v8.setFlagsFromString('--no-expose-gc');
  }
}

/** Runs collectStartupGarbage once the server has settled; the timer does not hold the process open. */
export function scheduleStartupCollection(delayMs = STARTUP_COLLECTION_DELAY_MS): NodeJS.Timeout {
  return setTimeout(collectStartupGarbage, delayMs).unref();
}

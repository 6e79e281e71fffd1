import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // One test file per CPU, not vitest's CPUs - 1: most of a file's time is spent waiting (on the
    // processes, sockets and PostgreSQL it drives), and on a 2-CPU machine the default of one
    // worker left the suite at about 16 minutes.
    maxWorkers: os.availableParallelism(),
    // The pool keeps its workers for the whole run instead of scaling them down and up again.
    minWorkers: os.availableParallelism(),
    // One module graph per worker, not per file: the sources hold no module-level mutable state
    // (DESIGN.md, Conventions), and importing the app's ~2,000 modules again for each of the 176
    // files took about 150 s of the workers' time (vitest's "collect"). Suite on 2 CPUs: about
    // 9 min -> 6.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ['test/helpers/global-setup.ts'],
  },
});

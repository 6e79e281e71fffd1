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
    testTimeout: 30_000,
    hookTimeout: 60_000,
    globalSetup: ['test/helpers/global-setup.ts'],
  },
});

import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

describe('CLARION_BUSY_WORKER_PERCENT', () => {
  const base = { CLARION_DATA_DIR: '/tmp/clarion-config-test' };

  it('defaults to 5 and accepts 1 to 100', () => {
    expect(loadConfig(base).busyWorkerPercent).toBe(5);
    expect(loadConfig({ ...base, CLARION_BUSY_WORKER_PERCENT: '100' }).busyWorkerPercent).toBe(100);
    expect(loadConfig({ ...base, CLARION_BUSY_WORKER_PERCENT: '1' }).busyWorkerPercent).toBe(1);
  });

  it('refuses a value outside 1 to 100, or not a whole number', () => {
    for (const value of ['0', '101', '7.5', 'lots']) {
      expect(() => loadConfig({ ...base, CLARION_BUSY_WORKER_PERCENT: value }), value).toThrow(/CLARION_BUSY_WORKER_PERCENT/);
    }
  });
});

describe('CLARION_DEFAULT_MESSAGES_CAP', () => {
  const base = { CLARION_DATA_DIR: '/tmp/clarion-config-test' };

  it('is bounded by the accounts column (a 32-bit integer on PostgreSQL), refused past it at start', () => {
    expect(loadConfig({ ...base, CLARION_DEFAULT_MESSAGES_CAP: '2147483647' }).defaultMessagesCap).toBe(2_147_483_647);
    expect(() => loadConfig({ ...base, CLARION_DEFAULT_MESSAGES_CAP: '3000000000' })).toThrow(/CLARION_DEFAULT_MESSAGES_CAP/);
  });
});

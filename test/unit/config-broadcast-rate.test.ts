import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

describe('CLARION_BROADCAST_RATE', () => {
  const base = { CLARION_DATA_DIR: '/tmp/clarion-config-test' };

  it('defaults to 100 messages a second and accepts 1 to 100000', () => {
    expect(loadConfig(base).broadcastRate).toBe(100);
    expect(loadConfig({ ...base, CLARION_BROADCAST_RATE: '1' }).broadcastRate).toBe(1);
    expect(loadConfig({ ...base, CLARION_BROADCAST_RATE: '100000' }).broadcastRate).toBe(100_000);
  });

  it('refuses a value outside 1 to 100000, or not a whole number', () => {
    for (const value of ['0', '100001', '2.5', 'fast']) {
      expect(() => loadConfig({ ...base, CLARION_BROADCAST_RATE: value }), value).toThrow(/CLARION_BROADCAST_RATE/);
    }
  });
});

describe('CLARION_BROADCAST_DOMAIN_RATE', () => {
  const base = { CLARION_DATA_DIR: '/tmp/clarion-config-test' };

  it('is absent unless set (the account\'s rate bounds each domain), and accepts 1 to 100000', () => {
    expect(loadConfig(base).broadcastDomainRate).toBeUndefined();
    expect(loadConfig({ ...base, CLARION_BROADCAST_DOMAIN_RATE: '' }).broadcastDomainRate).toBeUndefined();
    expect(loadConfig({ ...base, CLARION_BROADCAST_DOMAIN_RATE: '1' }).broadcastDomainRate).toBe(1);
    expect(loadConfig({ ...base, CLARION_BROADCAST_DOMAIN_RATE: '100000' }).broadcastDomainRate).toBe(100_000);
  });

  it('refuses a value outside 1 to 100000, or not a whole number', () => {
    for (const value of ['0', '100001', '2.5', 'fast']) {
      expect(() => loadConfig({ ...base, CLARION_BROADCAST_DOMAIN_RATE: value }), value).toThrow(/CLARION_BROADCAST_DOMAIN_RATE/);
    }
  });
});

describe('CLARION_BROADCAST_MAX_IN_FLIGHT', () => {
  const base = { CLARION_DATA_DIR: '/tmp/clarion-config-test' };

  it('is absent unless set (two seconds of the account rate), and accepts 1 to 10000000', () => {
    expect(loadConfig(base).broadcastMaxInFlight).toBeUndefined();
    expect(loadConfig({ ...base, CLARION_BROADCAST_MAX_IN_FLIGHT: '1' }).broadcastMaxInFlight).toBe(1);
    expect(loadConfig({ ...base, CLARION_BROADCAST_MAX_IN_FLIGHT: '10000000' }).broadcastMaxInFlight).toBe(10_000_000);
  });

  it('refuses a value outside 1 to 10000000, or not a whole number', () => {
    for (const value of ['0', '10000001', '2.5', 'many']) {
      expect(() => loadConfig({ ...base, CLARION_BROADCAST_MAX_IN_FLIGHT: value }), value).toThrow(/CLARION_BROADCAST_MAX_IN_FLIGHT/);
    }
  });
});

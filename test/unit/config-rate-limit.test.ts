import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

/** The ConfigError's text: one line per bad variable. */
function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message.split('\n');
  }
  throw new Error('expected a ConfigError');
}

describe('rate limit settings', () => {
  it('defaults to 30000 requests per key and 60000 per address a minute, no trusted proxy', () => {
    expect(loadConfig({})).toMatchObject({ rateLimitPerKey: 30_000, rateLimitPerIp: 60_000, rateLimitWindowMs: 60_000, trustProxy: false });
  });

  it('takes counts and a window in seconds, and turns a limit off with 0 or off', () => {
    expect(loadConfig({ CLARION_RATE_LIMIT_PER_KEY: '100', CLARION_RATE_LIMIT_PER_IP: '250', CLARION_RATE_LIMIT_WINDOW: '10' })).toMatchObject({
      rateLimitPerKey: 100,
      rateLimitPerIp: 250,
      rateLimitWindowMs: 10_000,
    });
    expect(loadConfig({ CLARION_RATE_LIMIT_PER_KEY: '0', CLARION_RATE_LIMIT_PER_IP: 'OFF' })).toMatchObject({ rateLimitPerKey: null, rateLimitPerIp: null });
  });

  it('takes the addresses of trusted proxies', () => {
    expect(loadConfig({ CLARION_TRUST_PROXY: '10.0.0.1, 10.1.0.0/16,::1,fd00::/8,loopback' }).trustProxy).toBe('10.0.0.1,10.1.0.0/16,::1,fd00::/8,loopback');
    expect(loadConfig({ CLARION_TRUST_PROXY: 'off' }).trustProxy).toBe(false);
  });

  it('refuses each bad value in one line naming the variable and what it accepts', () => {
    expect(
      problems({ CLARION_RATE_LIMIT_PER_KEY: 'many', CLARION_RATE_LIMIT_PER_IP: '-1', CLARION_RATE_LIMIT_WINDOW: '0', CLARION_TRUST_PROXY: '2' }),
    ).toEqual([
      'CLARION_RATE_LIMIT_PER_KEY must be an integer >= 1, or 0 or off to turn it off, got "many"',
      'CLARION_RATE_LIMIT_PER_IP must be an integer >= 1, or 0 or off to turn it off, got "-1"',
      'CLARION_RATE_LIMIT_WINDOW must be an integer from 1 to 86400, got "0"',
      'CLARION_TRUST_PROXY must be off, or a comma-separated list of proxy addresses (10.0.0.1, 10.0.0.0/8, loopback), got "2"',
    ]);
    expect(problems({ CLARION_TRUST_PROXY: '10.0.0.0/33' })).toHaveLength(1);
    expect(problems({ CLARION_TRUST_PROXY: 'true' })).toHaveLength(1);
  });
});

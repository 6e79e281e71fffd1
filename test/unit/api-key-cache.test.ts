import { describe, expect, it } from 'vitest';
import { ApiKeyCache } from '../../src/modules/auth/api-key-cache.js';
import type { AuthContext } from '../../src/modules/auth/auth-context.js';
import { ManualClock } from '../helpers/context.js';

const auth: AuthContext = { accountId: 'acc', envId: 'env', via: 'apiKey', scope: 'environment', keyId: 'k1' };

describe('ApiKeyCache', () => {
  it('keeps a key for its time to live on the injected clock, then forgets it', () => {
    const clock = new ManualClock(new Date('2026-01-01T00:00:00.000Z'));
    const cache = new ApiKeyCache(clock, 2000);
    cache.set('clarion_sk_a', auth);
    clock.advance(1999);
    expect(cache.get('clarion_sk_a')).toEqual(auth);
    clock.advance(1);
    expect(cache.get('clarion_sk_a')).toBeUndefined();
  });

  it('hands out copies, so a request that selects another environment does not change the cached one', () => {
    const cache = new ApiKeyCache(new ManualClock());
    cache.set('clarion_sk_b', auth);
    const first = cache.get('clarion_sk_b')!;
    first.envId = 'another';
    expect(cache.get('clarion_sk_b')!.envId).toBe('env');
  });

  it('forgets every key on clear (a revocation) and stays bounded', () => {
    const cache = new ApiKeyCache(new ManualClock(), 2000, 3);
    for (const key of ['k1', 'k2', 'k3']) cache.set(key, auth);
    cache.set('k4', auth);
    expect(['k1', 'k2', 'k3', 'k4'].filter((k) => cache.get(k))).toEqual(['k4']);
    cache.clear();
    expect(cache.get('k4')).toBeUndefined();
  });
});

// The deduplication fingerprint's text is fixed across releases: dedup_keys holds fingerprints
// past an upgrade, and a changed text would let a duplicate through once inside a window. These
// values were computed by the first implementation (commit 67f7178); they cover key order at
// every depth, integer-like keys, arrays, unicode, x- fields and the aliases.
import { describe, expect, it } from 'vitest';
import { canonicalJson, contentFingerprint } from '../../src/modules/sending/send-gates.js';

const fingerprint = (body: object) => contentFingerprint('t', 'u', body);

describe('dedup fingerprint', () => {
  it('keeps the fingerprints of the first implementation', () => {
    expect(fingerprint({ type: 'shipped', to: { id: 'ada' }, inapp: { title: 'Hi', url: 'u' }, parameters: { a: 1, b: 2 } })).toBe('e2b8e9c725ea5f8825c2d1eac58fcd809be7a2c7b6b1c5bfe0b2974af84e7953');
    expect(
      fingerprint({
        type: 'shipped',
        to: { id: 'ada' },
        inapp: { title: 'Hi', url: 'u' },
        parameters: { 10: 'x', 2: 'y', b: [1, { z: null, a: 'é\u2028' }], a: 1.5e300 },
        'x-custom': 1,
        email: { subject: 's', html: '<p>"q"</p>' },
        subNotificationId: 'p1',
        schedule: 'now',
        forceChannels: ['EMAIL'],
      }),
    ).toBe('fbcd3a5c961d3cf7288e3e8b30bb8d931512d28fbad4440c30c00d2979bcfe5f');
    expect(fingerprint({ notificationId: 'shipped', user: { id: 'ada' }, mergeTags: { k: { '': 1, Z: 2, a: [] } }, secondaryId: 's2', options: { email: { condition: '{{ a }}' } } })).toBe(
      '8f38fd1a7837b78318006d059ae30131e874255e4d94fed83f168d6152dfec29',
    );
    expect(fingerprint({ type: 'shipped', to: { id: 'ada' }, sms: { message: 'm' } })).toBe('8da0eab8a398e6fc85f8fdf7a38de10f1f3124b815ad5fcea288373c11224d65');
  });

  it('writes JSON with keys in UTF-16 order at every depth, integer-like keys included, and undefined values left out', () => {
    expect(canonicalJson({ b: 1, a: [{ y: undefined, x: 'é' }, undefined, null], 10: true, 2: false, B: {} })).toBe('{"10":true,"2":false,"B":{},"a":[{"x":"é"},null,null],"b":1}');
    expect(canonicalJson([])).toBe('[]');
    expect(canonicalJson('a"b')).toBe('"a\\"b"');
    expect(canonicalJson(undefined)).toBe('null');
  });
});

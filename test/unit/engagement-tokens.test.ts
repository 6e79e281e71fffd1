// Engagement tokens (signed, kind-bound, refused when altered in any character) and the HTML
// rewriting of composition (which links are tracked, how tags are read, where the pixel goes).
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { applyTracking, parseLinkTags } from '../../src/channels/email/compose.js';
import { EngagementTokens } from '../../src/modules/engagement/tokens.js';

describe('engagement tokens', () => {
  const tokens = new EngagementTokens(randomBytes(32));

  it('round-trips each kind and refuses a token used as another kind', () => {
    const open = tokens.sign({ kind: 'open', envId: 'env', deliveryId: 'd1' });
    const click = tokens.sign({ kind: 'click', envId: 'env', deliveryId: 'd1', url: 'https://x.example/?a=1&b=2', tags: { c: ['v'] } });
    const unsub = tokens.sign({ kind: 'unsubscribe', accountId: 'acc', envId: 'env', userId: 'u', notificationId: 'n', trackingId: 't' });
    expect(tokens.verify(open, 'open')).toEqual({ kind: 'open', envId: 'env', deliveryId: 'd1' });
    expect(tokens.verify(click, 'click')).toEqual({ kind: 'click', envId: 'env', deliveryId: 'd1', url: 'https://x.example/?a=1&b=2', tags: { c: ['v'] } });
    expect(tokens.verify(unsub, 'unsubscribe')).toMatchObject({ userId: 'u', notificationId: 'n' });
    expect(tokens.verify(open, 'click')).toBeNull();
    expect(tokens.verify(click, 'unsubscribe')).toBeNull();
    expect(tokens.verify(unsub, 'open')).toBeNull();
  });

  it('refuses a change of any single character, and tokens of another key', () => {
    const token = tokens.sign({ kind: 'open', envId: 'env', deliveryId: 'delivery-1' });
    for (let i = 0; i < token.length; i++) {
      const c = token[i] === 'A' ? 'B' : 'A';
      expect(tokens.verify(token.slice(0, i) + c + token.slice(i + 1), 'open'), `position ${i}`).toBeNull();
    }
    expect(new EngagementTokens(randomBytes(32)).verify(token, 'open')).toBeNull();
    for (const junk of ['', '.', 'abc', 'a.b', `${token}.x`, '%%%.%%%']) expect(tokens.verify(junk, 'open')).toBeNull();
  });

  it('mailto tokens: 42 lower-case base32 characters, any case accepted, any change refused, no other kind', () => {
    const id = '0193a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b';
    const token = tokens.mailToken(id)!;
    expect(token).toMatch(/^[a-z2-7]{42}$/);
    expect(`unsubscribe+${token}`.length).toBeLessThanOrEqual(64);
    expect(tokens.verifyMailToken(token)).toBe(id);
    expect(tokens.verifyMailToken(token.toUpperCase())).toBe(id);
    expect(tokens.mailToken(id.toUpperCase())).toBe(token);
    for (let i = 0; i < token.length; i++) {
      for (const c of ['a', 'b', '7']) {
        if (c === token[i]) continue;
        expect(tokens.verifyMailToken(token.slice(0, i) + c + token.slice(i + 1)), `position ${i} -> ${c}`).toBeNull();
      }
    }
    expect(new EngagementTokens(randomBytes(32)).verifyMailToken(token)).toBeNull();
    for (const junk of ['', token.slice(1), `${token}a`, `${token.slice(0, -1)}1`]) expect(tokens.verifyMailToken(junk)).toBeNull();
    // Not a delivery id the other tokens can carry, and neither kind passes as the other.
    expect(tokens.mailToken('delivery-1')).toBeNull();
    expect(tokens.verify(token, 'unsubscribe')).toBeNull();
    const unsub = tokens.sign({ kind: 'unsubscribe', accountId: 'acc', envId: 'env', userId: 'u', notificationId: 'n', trackingId: 't' });
    expect(tokens.verifyMailToken(unsub)).toBeNull();
    expect(tokens.verifyMailToken(unsub.slice(0, 42))).toBeNull();
  });
});

describe('applyTracking', () => {
  const tracking = { pixelUrl: 'https://t.example/e/open/P', link: (url: string, tags?: Record<string, string[]>) => `https://t.example/c?u=${encodeURIComponent(url)}${tags ? `&t=${encodeURIComponent(JSON.stringify(tags))}` : ''}` };

  it('tracks http(s) links in either quote, decodes entities, keeps others as written', () => {
    const html = `<body><a href="https://a.example/?x=1&amp;y=2">A</a><a class="b" href='http://b.example/'>B</a><a data-href="https://no.example/" href="#top">top</a><a href="mailto:m@x.example">m</a><a href="https://c.example/" data-no-track>c</a></body>`;
    const out = applyTracking(html, { link: tracking.link });
    expect(out).toContain(`href="https://t.example/c?u=${encodeURIComponent('https://a.example/?x=1&y=2')}"`);
    expect(out).toContain(`<a class="b" href="https://t.example/c?u=${encodeURIComponent('http://b.example/')}">B</a>`);
    expect(out).toContain('<a data-href="https://no.example/" href="#top">top</a>');
    expect(out).toContain('<a href="mailto:m@x.example">m</a>');
    expect(out).toContain('<a href="https://c.example/" data-no-track>c</a>');
    expect(out).not.toContain('<img');
  });

  it('reads data-link-tags before or after href, and puts the pixel just before </body> (or last)', () => {
    const out = applyTracking('<html><body><a data-link-tags="k:v;k:w;solo" href="https://a.example/">A</a></body></html>', tracking);
    expect(out).toContain(encodeURIComponent(JSON.stringify({ k: ['v', 'w'], solo: [''] })));
    expect(out).toMatch(/<img src="https:\/\/t\.example\/e\/open\/P" width="1" height="1"[^>]*\/><\/body><\/html>$/);
    expect(applyTracking('<p>fragment</p>', { pixelUrl: 'https://t.example/p' })).toMatch(/^<p>fragment<\/p><img src="https:\/\/t\.example\/p"/);
    expect(parseLinkTags(undefined)).toBeUndefined();
    expect(parseLinkTags(' ; ')).toBeUndefined();
  });

  it('leaves the HTML untouched without tracking', () => {
    const html = '<a href="https://a.example/">A</a>';
    expect(applyTracking(html, undefined)).toBe(html);
    expect(applyTracking(html, {})).toBe(html);
  });
});

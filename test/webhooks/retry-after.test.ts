// Retry-After as RFC 9110 §10.2.3 has it: delay-seconds or an HTTP-date (IMF-fixdate, rfc850,
// asctime); any other value is ignored and the retry schedule applies, so an endpoint answering
// 429 with `Retry-After: 1.5` is not retried every second until its attempts are spent.
import { beforeAll, describe, expect, it } from 'vitest';
import { RETRY_DELAYS_MS, parseRetryAfter } from '../../src/modules/webhooks/schedule.js';
import type { WebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import type { TestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import type { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { manualClockWebhooks, transition } from './webhook-fixtures.js';

describe('parseRetryAfter', () => {
  const at = (iso: string) => new Date(iso);
  const now = at('1994-11-06T08:49:00Z');

  it('reads delay-seconds: digits only', () => {
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('007', now)).toBe(7_000);
    expect(parseRetryAfter(' 7 ', now)).toBe(7_000);
    // The first of repeated headers.
    expect(parseRetryAfter(['30', '5'], now)).toBe(30_000);
  });

  it('reads an IMF-fixdate', () => {
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', now)).toBe(37_000);
    expect(parseRetryAfter('Mon, 07 Nov 1994 08:49:00 GMT', now)).toBe(24 * 3600_000);
    // A date already past: retry at once (the caller keeps its 1 s minimum).
    expect(parseRetryAfter('Sat, 05 Nov 1994 08:49:00 GMT', now)).toBe(0);
  });

  it('reads the obsolete rfc850 date, its two-digit year at most 50 years ahead', () => {
    expect(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', now)).toBe(37_000);
    const in2026 = at('2026-03-01T00:00:00Z');
    expect(parseRetryAfter('Sunday, 01-Mar-26 00:01:00 GMT', in2026)).toBe(60_000);
    // 2076-02-01 is within 50 years of 2026-03-01: a date ahead...
    expect(parseRetryAfter('Saturday, 01-Feb-76 00:00:00 GMT', in2026)).toBe(Date.UTC(2076, 1, 1) - in2026.getTime());
    // ...2076-04-01 is not: 1976, in the past.
    expect(parseRetryAfter('Thursday, 01-Apr-76 00:00:00 GMT', in2026)).toBe(0);
  });

  it('reads the obsolete asctime date, a one-digit day after two spaces', () => {
    expect(parseRetryAfter('Sun Nov  6 08:49:37 1994', now)).toBe(37_000);
    expect(parseRetryAfter('Wed Nov 16 08:49:00 1994', now)).toBe(10 * 24 * 3600_000);
  });

  it('ignores every other value (Date.parse reads most of them as dates in 2001)', () => {
    for (const value of [
      '-5',
      '1.5',
      '+5',
      '5s',
      '1e3',
      '12-1',
      'May 5',
      'soon',
      '',
      '   ',
      '2026-01-01T00:00:00Z',
      'sun, 06 Nov 1994 08:49:37 GMT', // names are case-sensitive
      'Sun, 6 Nov 1994 08:49:37 GMT', // two-digit day
      'Sun, 06 Nov 94 08:49:37 GMT', // four-digit year
      'Sun, 06 Nov 1994 08:49:37 UTC',
      'Sun, 06 Nov 1994 08:49 GMT',
      'Sun, 31 Feb 1994 08:49:37 GMT', // no such day
      'Sun, 06 Nov 1994 24:00:00 GMT',
      'Sun, 06-Nov-94 08:49:37 GMT', // rfc850 names the day in full
      'Sun Nov 6 08:49:37 1994', // asctime pads a one-digit day with a space
    ]) {
      expect(parseRetryAfter(value, now), JSON.stringify(value)).toBeNull();
    }
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });
});

describe.each(STORAGE_KINDS)('a 429 with an unreadable Retry-After (%s)', (kind) => {
  const h = manualClockWebhooks(kind);
  const { clock, scope } = h;
  let t: TestContext;
  let receiver: WebhookReceiver;
  let service: WebhooksService;
  beforeAll(() => ({ t, receiver, service } = h));

  it('is retried on the schedule, not after the 1 s minimum', async () => {
    const { id } = await service.create(scope(), { webhook: receiver.url, events: ['EMAIL_FAILED'] });
    receiver.answer({ status: 429, headers: { 'retry-after': '1.5' } }, { status: 429, headers: { 'retry-after': 'May 5' } }, { status: 200, body: 'ok' });
    await transition(t, 'email', 'failed');
    const t0 = clock.now().getTime();
    expect(await service.worker.runOnce()).toBe(1);
    clock.set(new Date(t0 + 1_000));
    expect(await service.worker.runOnce()).toBe(0);
    clock.set(new Date(t0 + RETRY_DELAYS_MS[0]));
    expect(await service.worker.runOnce()).toBe(1);
    clock.set(new Date(t0 + RETRY_DELAYS_MS[0] + 1_000));
    expect(await service.worker.runOnce()).toBe(0);
    clock.set(new Date(t0 + RETRY_DELAYS_MS[0] + RETRY_DELAYS_MS[1]));
    expect(await service.worker.runOnce()).toBe(1);
    const { attempts } = await service.attempts(scope(), id, {});
    expect(attempts.map((a) => [a.statusCode, a.success, a.nextAttemptAt])).toEqual([
      [200, true, null],
      [429, false, new Date(t0 + RETRY_DELAYS_MS[0] + RETRY_DELAYS_MS[1]).toISOString()],
      [429, false, new Date(t0 + RETRY_DELAYS_MS[0]).toISOString()],
    ]);
  });
});

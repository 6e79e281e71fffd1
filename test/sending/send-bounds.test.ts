// Content that can never be delivered is refused at acceptance, naming the field, before anything is written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FCM_MAX_PAYLOAD_BYTES, fcmPayloadBytes } from '../../src/channels/push/fcm-message.js';
import { DEFAULT_LIMITS } from '../../src/rendering/liquid.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { countAcceptedSends } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('send content bounds (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  const send = (type: string, html: string) =>
    t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type, to: { id: 'bounds-user', email: 'b@clarion.test' }, email: { subject: 'Hi', html } } });

  it('refuses a 24 MB email html with 400 VALIDATION_FAILED naming the field, and stores nothing', async () => {
    const res = await send('bounds_huge', `<p>${'x'.repeat(24_000_000)}</p>`);
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.error.code).toBe('VALIDATION_FAILED');
    expect(body.error.message).toContain('html');
    expect(await countAcceptedSends(t.deps, { notification_id: 'bounds_huge' })).toBe(0);
  });

  it('accepts html at the bound and refuses one character more', async () => {
    const bound = DEFAULT_LIMITS.parseLimit;
    expect(bound).toBe(2_000_000);
    expect((await send('bounds_at', 'x'.repeat(bound))).statusCode).toBe(200);
    const over = await send('bounds_over', 'x'.repeat(bound + 1));
    expect(over.statusCode).toBe(400);
    expect(over.json().error.message).toContain('html');
    expect(await countAcceptedSends(t.deps, { notification_id: 'bounds_at' })).toBe(1);
    expect(await countAcceptedSends(t.deps, { notification_id: 'bounds_over' })).toBe(0);
  });

  it('refuses push customData no device could receive (over 4,096 bytes with an empty title and message), and takes the largest that fits', async () => {
    const push = (type: string, blob: string) =>
      t.app.inject({
        method: 'POST',
        url: '/send',
        headers: t.auth,
        payload: { type, to: { id: 'bounds-user' }, mobile_push: { title: 'T', message: 'M' }, options: { push: { customData: { blob } } } },
      });
    // The largest blob FCM takes beside an empty notification (APNs' {"aps":{}} wrapper is smaller).
    const empty = fcmPayloadBytes({ notification: { title: '', body: '' }, data: { blob: '' } });
    const largest = 'b'.repeat(FCM_MAX_PAYLOAD_BYTES - empty);
    expect((await push('bounds_push_fits', largest)).statusCode).toBe(200);
    const over = await push('bounds_push_over', `${largest}b`);
    expect(over.statusCode).toBe(400);
    expect(over.json().error).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('options.push.customData') });
    expect(over.json().error.fix).toBeTruthy();
    expect(await countAcceptedSends(t.deps, { notification_id: 'bounds_push_fits' })).toBe(1);
    expect(await countAcceptedSends(t.deps, { notification_id: 'bounds_push_over' })).toBe(0);
  });
});

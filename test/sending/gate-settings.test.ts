// A notification type's deduplication and throttling settings over HTTP on both engines: what
// the gates can honour is stored and read back exactly as sent (create, patch, get, list);
// anything else answers 400 VALIDATION_FAILED naming the field, with a fix, and stores nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { expectTypeSettingsRefused } from '../helpers/type-settings.js';

const throttle = (over: Record<string, unknown>) => ({ max: 5, period: 1, unit: 'hours', forever: false, scope: ['userId', 'notificationId'], ...over });

const ACCEPTED: Record<string, unknown>[] = [
  { deduplication: { duration: 1 } },
  { deduplication: { duration: 366 * 24 * 3600 } },
  { throttling: throttle({}) },
  { throttling: throttle({ scope: ['notificationId'] }) },
  { throttling: throttle({ scope: ['userId'], unit: 'seconds', period: 30 }) },
  ...['minutes', 'days', 'months', 'years'].map((unit) => ({ throttling: throttle({ unit, period: 2 }) })),
  // forever counts without a window: period and unit are kept as sent and not used.
  { throttling: throttle({ forever: true, period: 0 }) },
  { deduplication: { duration: 3600 }, throttling: throttle({ max: 1, unit: 'days' }) },
];

/** [what is wrong, the settings, text the error message must contain] */
const REFUSED: [string, Record<string, unknown>, string][] = [
  ['duration 0', { deduplication: { duration: 0 } }, 'deduplication.duration'],
  ['duration fraction', { deduplication: { duration: 1.5 } }, 'deduplication.duration'],
  ['duration over a year', { deduplication: { duration: 366 * 24 * 3600 + 1 } }, 'deduplication.duration'],
  ['duration negative', { deduplication: { duration: -1 } }, 'duration'],
  ['duration missing', { deduplication: {} }, 'duration'],
  ['dedup unknown key', { deduplication: { duration: 60, key: 'x' } }, 'key'],
  ['max 0', { throttling: throttle({ max: 0 }) }, 'throttling.max'],
  ['max fraction', { throttling: throttle({ max: 2.5 }) }, 'throttling.max'],
  ['period 0', { throttling: throttle({ period: 0 }) }, 'throttling.period'],
  ['period fraction', { throttling: throttle({ period: 0.5 }) }, 'throttling.period'],
  ['period over a century', { throttling: throttle({ unit: 'years', period: 101 }) }, 'throttling.period'],
  ['unit', { throttling: throttle({ unit: 'weeks' }) }, 'unit'],
  ['scope empty', { throttling: throttle({ scope: [] }) }, 'throttling.scope'],
  ['scope unknown', { throttling: throttle({ scope: ['email'] }) }, 'scope'],
  ['scope repeated', { throttling: throttle({ scope: ['userId', 'userId'] }) }, 'scope'],
  ['forever missing', { throttling: { max: 5, period: 1, unit: 'hours', scope: ['userId'] } }, 'forever'],
];

describe.each(STORAGE_KINDS)('deduplication and throttling settings (%s)', (kind) => {
  let t: TestContext;
  const req = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown) =>
    t.app.inject({ method, url, headers: t.auth, ...(payload !== undefined ? { payload: payload as object } : {}) });

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('stores what the gates honour and reads it back exactly as sent', async () => {
    for (const [i, settings] of ACCEPTED.entries()) {
      const id = `gated-${i}`;
      const created = await req('POST', '/types', { notificationId: id, title: id, channels: ['EMAIL'], ...settings });
      expect(created.statusCode, JSON.stringify(settings) + created.body).toBe(200);
      expect(created.json()).toMatchObject(settings);
      expect((await req('GET', `/types/${id}`)).json()[0]).toMatchObject(settings);
    }
    const patched = await req('PATCH', '/types/gated-0', ACCEPTED[2]);
    expect(patched.json()).toMatchObject({ ...ACCEPTED[0], ...ACCEPTED[2] });
    const listed = (await req('GET', '/types')).json<Record<string, unknown>[]>().find((x) => x.notificationId === 'gated-0');
    expect(listed).toMatchObject({ ...ACCEPTED[0], ...ACCEPTED[2] });
    // null turns them off.
    const cleared = (await req('PATCH', '/types/gated-0', { deduplication: null, throttling: null })).json();
    expect(cleared.deduplication).toBeUndefined();
    expect(cleared.throttling).toBeUndefined();
  });

  it('refuses each wrong value with a 400 that names it and says what to do, on create and on patch, storing nothing', async () => {
    await req('POST', '/types', { notificationId: 'kept', title: 'Kept', channels: ['EMAIL'], ...ACCEPTED[ACCEPTED.length - 1] });
    await expectTypeSettingsRefused(req, REFUSED);
    expect((await req('GET', '/types/refused')).statusCode).toBe(404);
    expect((await req('GET', '/types/kept')).json()[0]).toMatchObject(ACCEPTED[ACCEPTED.length - 1]);
  });
});

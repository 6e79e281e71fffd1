// A notification type's delivery settings over HTTP on both engines: every delivery option's
// accepted values read back exactly as sent; refused values answer 400 VALIDATION_FAILED naming
// the setting. Every setting issue 13 names is enforced now: digests (test/digests), in-app
// batching (test/sending/inapp-batching), deduplication and throttling
// (test/sending/gate-settings, throttling, deduplication) and a retention in days.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { expectTypeSettingsRefused } from '../helpers/type-settings.js';

const ACCEPTED: Record<string, unknown>[] = [
  { EMAIL: { defaultDeliveryOption: 'instant' } },
  { EMAIL: { defaultDeliveryOption: 'off', off: { enabled: true }, instant: { enabled: false } } },
  { SMS: { defaultDeliveryOption: 'instant', off: { enabled: false }, instant: { enabled: true }, hourly: { enabled: false } } },
  { PUSH: { defaultDeliveryOption: 'instant', daily: { enabled: false, hour: '00:00' } } },
  { PUSH: { defaultDeliveryOption: 'instant', daily: { enabled: false, hour: '23:59' } } },
  { PUSH: { defaultDeliveryOption: 'instant', daily: { enabled: false } } },
  { WEB_PUSH: { defaultDeliveryOption: 'instant', weekly: { enabled: false, hour: '07:05', day: 'Monday' } } },
  { WEB_PUSH: { defaultDeliveryOption: 'instant', weekly: { enabled: false, hour: '19:30', day: 'sunday' } } },
  { SLACK: { defaultDeliveryOption: 'off', monthly: { enabled: false, hour: '12:00', date: 'first' } } },
  { CALL: { defaultDeliveryOption: 'instant', monthly: { enabled: false, hour: '08:15', date: 'last' } } },
  { INAPP_WEB: { defaultDeliveryOption: 'instant', off: { enabled: true }, instant: { enabled: true, batching: false, batchingKey: 'parameters.postId', batchingWindow: 1500 } } },
  { INAPP_WEB: { defaultDeliveryOption: 'off' } },
  { INAPP_WEB: { defaultDeliveryOption: 'instant', instant: { enabled: true, batching: true, batchingKey: 'parameters.postId', batchingWindow: 60000 } } },
  {
    EMAIL: { defaultDeliveryOption: 'instant', off: { enabled: true }, instant: { enabled: true }, hourly: { enabled: false }, daily: { enabled: false, hour: '09:00' }, weekly: { enabled: false, hour: '09:00', day: 'Friday' }, monthly: { enabled: false, hour: '09:00', date: 'first' } },
    INAPP_WEB: { defaultDeliveryOption: 'instant' },
    SMS: { defaultDeliveryOption: 'off' },
  },
  // Digests, offered and as the default, on every channel but in-app.
  { EMAIL: { defaultDeliveryOption: 'hourly' } },
  { SMS: { defaultDeliveryOption: 'daily', daily: { enabled: true, hour: '18:30' } } },
  { PUSH: { defaultDeliveryOption: 'instant', weekly: { enabled: true, hour: '08:00', day: 'Friday' } } },
  { SLACK: { defaultDeliveryOption: 'monthly', monthly: { enabled: true, hour: '10:00', date: 'last' }, hourly: { enabled: true } } },
];

/** [what is wrong, the settings, text the error message must contain] */
const REFUSED: [string, Record<string, unknown>, string][] = [
  ...(['hourly', 'daily', 'weekly', 'monthly'] as const).map((o): [string, Record<string, unknown>, string] => [`default ${o} disabled`, { options: { EMAIL: { defaultDeliveryOption: o, [o]: { enabled: false } } } }, `options.EMAIL.${o}.enabled is false`]),
  ['unknown default', { options: { EMAIL: { defaultDeliveryOption: 'sometimes' } } }, 'defaultDeliveryOption'],
  ['no default', { options: { EMAIL: { off: { enabled: true } } } }, 'defaultDeliveryOption'],
  ...['24:00', '9:00', '09:60', '0900', '09:00:00', '', 'noon'].map((hour): [string, Record<string, unknown>, string] => [`hour ${hour}`, { options: { EMAIL: { defaultDeliveryOption: 'instant', daily: { enabled: false, hour } } } }, 'daily/hour']),
  ['weekly hour', { options: { EMAIL: { defaultDeliveryOption: 'instant', weekly: { enabled: false, hour: '25:00', day: 'Monday' } } } }, 'weekly/hour'],
  ...['Mon', 'Funday', 'MONDAY', 'lundi', '1'].map((day): [string, Record<string, unknown>, string] => [`day ${day}`, { options: { EMAIL: { defaultDeliveryOption: 'instant', weekly: { enabled: false, hour: '09:00', day } } } }, 'weekly/day']),
  ...['middle', '15', 'First'].map((date): [string, Record<string, unknown>, string] => [`date ${date}`, { options: { EMAIL: { defaultDeliveryOption: 'instant', monthly: { enabled: false, date } } } }, 'monthly/date']),
  ['enabled missing', { options: { EMAIL: { defaultDeliveryOption: 'instant', off: {} } } }, 'off'],
  ['unknown option', { options: { EMAIL: { defaultDeliveryOption: 'instant', sometimes: { enabled: true } } } }, 'sometimes'],
  ['unknown channel', { options: { FAX: { defaultDeliveryOption: 'instant' } } }, 'FAX'],
  ['in-app digest default', { options: { INAPP_WEB: { defaultDeliveryOption: 'daily' } } }, 'INAPP_WEB/defaultDeliveryOption'],
  ['in-app digest option', { options: { INAPP_WEB: { defaultDeliveryOption: 'instant', daily: { enabled: false } } } }, 'daily'],
  ['in-app batching without a window', { options: { INAPP_WEB: { defaultDeliveryOption: 'instant', instant: { enabled: true, batching: true, batchingKey: 'k' } } } }, 'options.INAPP_WEB.instant.batchingWindow'],
  ['batching window 0', { options: { INAPP_WEB: { defaultDeliveryOption: 'instant', instant: { enabled: true, batchingWindow: 0 } } } }, 'batchingWindow'],
  ['batching key empty', { options: { INAPP_WEB: { defaultDeliveryOption: 'instant', instant: { enabled: true, batchingKey: '' } } } }, 'batchingKey'],
  ['default not allowed', { options: { EMAIL: { defaultDeliveryOption: 'off', off: { enabled: false } } } }, 'options.EMAIL.off.enabled is false'],
  ['deduplication without a window', { deduplication: { duration: 0 } }, 'deduplication.duration'],
  ['throttling of none', { throttling: { max: 0, period: 1, unit: 'hours', forever: false, scope: ['userId'] } }, 'throttling.max'],
  ['throttling unit', { throttling: { max: 3, period: 1, unit: 'weeks', forever: false, scope: ['userId'] } }, 'unit'],
  ['retention negative', { retention: -1 }, 'retention'],
  ['retention fraction', { retention: 1.5 }, 'retention'],
  ['retention too large', { retention: 2_147_483_648 }, 'retention'],
];

describe.each(STORAGE_KINDS)('notification type delivery settings (%s)', (kind) => {
  let t: TestContext;
  const req = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown) =>
    t.app.inject({ method, url, headers: t.auth, ...(payload !== undefined ? { payload: payload as object } : {}) });

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('accepts every supported option and reads it back exactly as sent (create, patch, get, list)', async () => {
    for (const [i, options] of ACCEPTED.entries()) {
      const id = `accepted-${i}`;
      const created = await req('POST', '/types', { notificationId: id, title: id, channels: ['EMAIL'], options, deduplication: null, throttling: null, retention: null });
      expect(created.statusCode, JSON.stringify(options) + created.body).toBe(200);
      expect(created.json().options).toEqual(options);
      const [read] = (await req('GET', `/types/${id}`)).json();
      expect(read.options).toEqual(options);
    }
    // A patch replaces the options as sent.
    const patched = await req('PATCH', '/types/accepted-0', { options: ACCEPTED[1] });
    expect(patched.json().options).toEqual(ACCEPTED[1]);
    const listed = (await req('GET', '/types')).json<{ notificationId: string; options?: unknown }[]>();
    expect(listed.find((x) => x.notificationId === 'accepted-0')!.options).toEqual(ACCEPTED[1]);
  });

  it('refuses each wrong or not-yet-supported setting with a 400 that names it, on create and on patch, storing nothing', async () => {
    await req('POST', '/types', { notificationId: 'kept', title: 'Kept', channels: ['EMAIL'], options: ACCEPTED[0] });
    await expectTypeSettingsRefused(req, REFUSED);
    expect((await req('GET', '/types/refused')).statusCode).toBe(404);
    const [kept] = (await req('GET', '/types/kept')).json();
    expect(kept.options).toEqual(ACCEPTED[0]);
    expect(kept.deduplication).toBeUndefined();
    expect(kept.throttling).toBeUndefined();
    expect(kept.retention).toBeUndefined();
  });

  it('accepts a retention in days, reads it back, and clears it with null', async () => {
    const created = await req('POST', '/types', { notificationId: 'kept-a-week', title: 'x', channels: ['INAPP_WEB'], retention: 7 });
    expect(created.statusCode, created.body).toBe(200);
    expect(created.json().retention).toBe(7);
    expect((await req('PATCH', '/types/kept-a-week', { retention: 0 })).json().retention).toBe(0);
    expect((await req('GET', '/types/kept-a-week')).json()[0].retention).toBe(0);
    expect((await req('PATCH', '/types/kept-a-week', { retention: null })).json().retention).toBeUndefined();
  });

  it('says what to do instead when a value cannot be honoured, and stores nothing', async () => {
    const res = await req('POST', '/types', { notificationId: 'dedup', title: 'x', channels: ['EMAIL'], deduplication: { duration: 0 } });
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('deduplication.duration') as unknown, fix: expect.stringContaining('Give the window in seconds') as unknown });
    expect((await req('GET', '/types/dedup')).statusCode).toBe(404);
  });
});

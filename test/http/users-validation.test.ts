import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { UsersService } from '../../src/modules/users/users.service.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { fcmToken, usersApi, webPushSubscription } from './users-helpers.js';

const props = (n: number, value: (i: number) => unknown = (i) => i) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`key${i}`, value(i)]));

describe.each(STORAGE_KINDS)('users validation (%s)', (kind) => {
  let t: TestContext;
  let api: ReturnType<typeof usersApi>;
  let service: UsersService;
  let n = 0;
  const fresh = () => `v${++n}`;

  beforeAll(async () => {
    t = await createTestContext(kind, { clock: new ManualClock() });
    api = usersApi(t);
    service = new UsersService(t.deps);
  });
  afterAll(() => t?.close());

  /** Expects a 400 with this code, a message naming `field`, and a fix; and that nothing was stored. */
  async function rejects(body: Record<string, unknown>, code: string, field: string) {
    const id = fresh();
    const res = await api.identify(id, body);
    expect(res.status, JSON.stringify(body).slice(0, 200)).toBe(400);
    expect(res.body.error.code).toBe(code);
    expect(res.body.error.message).toContain(field);
    expect(res.body.error.fix).toBeTruthy();
    expect((await api.get(id)).status).toBe(404);
    return res.body.error;
  }
  async function accepts(body: Record<string, unknown>) {
    const res = await api.identify(fresh(), body);
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).toBe(200);
    return res.body;
  }

  describe('properties limits (PROPERTY_LIMIT_EXCEEDED)', () => {
    it('at most 25 keys', async () => {
      await accepts({ properties: props(25) });
      await rejects({ properties: props(26) }, 'PROPERTY_LIMIT_EXCEEDED', '26 keys');
    });
    it('keys of at most 64 characters', async () => {
      await accepts({ properties: { ['k'.repeat(64)]: 1 } });
      await rejects({ properties: { ['k'.repeat(65)]: 1 } }, 'PROPERTY_LIMIT_EXCEEDED', 'kkkk');
    });
    it('string values of at most 256 characters', async () => {
      await accepts({ properties: { note: 'x'.repeat(256) } });
      await rejects({ properties: { note: 'x'.repeat(257) } }, 'PROPERTY_LIMIT_EXCEEDED', 'properties.note');
    });
    it('counts characters, not UTF-16 code units: an emoji is one', async () => {
      const emoji = '\u{1F600}';
      expect(emoji.length).toBe(2);
      const stored = await accepts({ properties: { [emoji.repeat(64)]: emoji.repeat(180) } });
      expect(stored.properties[emoji.repeat(64)]).toBe(emoji.repeat(180));
      await accepts({ properties: { note: emoji.repeat(250) } });
      await rejects({ properties: { [emoji.repeat(65)]: 1 } }, 'PROPERTY_LIMIT_EXCEEDED', emoji.repeat(40));
      const refused = await rejects({ properties: { note: emoji.repeat(257) } }, 'PROPERTY_LIMIT_EXCEEDED', 'properties.note');
      expect(refused.message).toContain('is 257 characters');
    });
    it('at most 1 KB serialized', async () => {
      // 4 x 250 characters: each value within limits, the whole over 1024 bytes.
      await rejects({ properties: props(4, () => 'y'.repeat(250)) }, 'PROPERTY_LIMIT_EXCEEDED', '1024');
      await accepts({ properties: props(3, () => 'y'.repeat(250)) });
    });
    it('values are strings, numbers or booleans', async () => {
      for (const value of [{ a: 1 }, ['x'], [1, 2]]) {
        await rejects({ properties: { bad: value } }, 'PROPERTY_LIMIT_EXCEEDED', 'properties.bad');
      }
      await rejects({ properties: 'nope' }, 'VALIDATION_FAILED', 'properties');
    });
    it('limits apply to the merged result, which then stays unchanged', async () => {
      const id = fresh();
      await api.identify(id, { properties: props(20) });
      const more = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`extra${i}`, i]));
      const res = await api.identify(id, { properties: more });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('PROPERTY_LIMIT_EXCEEDED');
      expect(res.body.error.message).toContain('merged');
      expect(Object.keys((await api.get(id)).body.properties)).toHaveLength(20);
      // Deleting keys in the same request makes room.
      const swap = { ...more, ...Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`key${i}`, null])) };
      expect((await api.identify(id, { properties: swap })).body.properties).toHaveProperty('extra9', 9);
    });
  });

  describe('push tokens (VALIDATION_FAILED)', () => {
    it('type FCM or APN, non-empty token, device with device_id', async () => {
      await rejects({ pushTokens: [{ ...fcmToken(), type: 'GCM' }] }, 'VALIDATION_FAILED', 'pushTokens/0/type');
      await rejects({ pushTokens: [{ ...fcmToken(), token: '' }] }, 'VALIDATION_FAILED', 'pushTokens/0/token');
      await rejects({ pushTokens: [{ type: 'FCM', token: 'x' }] }, 'VALIDATION_FAILED', 'device');
      await rejects({ pushTokens: [{ type: 'FCM', token: 'x', device: { model: 'p' } }] }, 'VALIDATION_FAILED', 'device_id');
    });
    it('environment defaults to the string "undefined"; duplicates collapse', async () => {
      const user = await accepts({ pushTokens: [fcmToken('a'), { ...fcmToken('b'), environment: 'sandbox' }, fcmToken('a', 'other')] });
      expect(user.pushTokens).toEqual([
        { type: 'FCM', token: 'b', device: { device_id: 'pixel-1' }, environment: 'sandbox' },
        { type: 'FCM', token: 'a', device: { device_id: 'other' }, environment: 'undefined' },
      ]);
    });
    it('environment is one of the spec\'s values: production, sandbox or undefined', async () => {
      const user = await accepts({ pushTokens: [{ type: 'APN', token: 'p', device: { device_id: 'i' }, environment: 'production' }] });
      expect(user.pushTokens[0].environment).toBe('production');
      for (const environment of ['prod', 'bogus', '']) {
        await rejects({ pushTokens: [{ type: 'APN', token: 'p', device: { device_id: 'i' }, environment }] }, 'VALIDATION_FAILED', 'pushTokens[0].environment must be "production", "sandbox" or "undefined"');
      }
    });
    it('the service checks the same rules for non-HTTP callers', async () => {
      const call = (token: unknown) => service.identify(t.account.accountId, t.account.clientId, { id: fresh(), pushTokens: [token] });
      await expect(call({ type: 'FCM', token: '  ', device: { device_id: 'd' } })).rejects.toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('pushTokens[0].token') });
      await expect(call({ type: 'FCM', token: 'x', device: {} })).rejects.toMatchObject({ message: expect.stringContaining('pushTokens[0].device.device_id') });
      await expect(call({ type: 'WNS', token: 'x', device: { device_id: 'd' } })).rejects.toBeInstanceOf(AppError);
    });
  });

  describe('web push subscriptions (VALIDATION_FAILED)', () => {
    it('endpoint is https (http only for localhost)', async () => {
      await accepts({ webPushTokens: [webPushSubscription()] });
      await accepts({ webPushTokens: [webPushSubscription('http://localhost:8080/push/1')] });
      await accepts({ webPushTokens: [webPushSubscription('http://127.0.0.1:8080/push/1')] });
      await rejects({ webPushTokens: [webPushSubscription('http://push.example.com/x')] }, 'VALIDATION_FAILED', 'webPushTokens[0].sub.endpoint');
      await rejects({ webPushTokens: [webPushSubscription('not a url')] }, 'VALIDATION_FAILED', 'webPushTokens[0].sub.endpoint');
      await rejects({ webPushTokens: [webPushSubscription('ftp://push.example.com/x')] }, 'VALIDATION_FAILED', 'endpoint');
    });
    it('p256dh is base64url of an uncompressed P-256 point', async () => {
      const sub = webPushSubscription();
      const withKey = (p256dh: string) => ({ webPushTokens: [{ sub: { ...sub.sub, keys: { ...sub.sub.keys, p256dh } } }] });
      const point = Buffer.from(sub.sub.keys.p256dh, 'base64url');
      await rejects(withKey(point.subarray(0, 64).toString('base64url')), 'VALIDATION_FAILED', 'p256dh');
      await rejects(withKey(Buffer.concat([Buffer.from([0x02]), point.subarray(1)]).toString('base64url')), 'VALIDATION_FAILED', 'p256dh');
      await rejects(withKey(Buffer.concat([Buffer.from([0x04]), Buffer.alloc(64, 1)]).toString('base64url')), 'VALIDATION_FAILED', 'p256dh');
      // Standard-base64 characters are not base64url.
      await rejects(withKey(`+/${point.toString('base64url').slice(2)}`), 'VALIDATION_FAILED', 'p256dh');
      await accepts(withKey(`${point.toString('base64url')}=`));
    });
    it('auth is base64url of 16 bytes', async () => {
      const sub = webPushSubscription();
      const withAuth = (auth: string) => ({ webPushTokens: [{ sub: { ...sub.sub, keys: { ...sub.sub.keys, auth } } }] });
      await rejects(withAuth(Buffer.alloc(15, 7).toString('base64url')), 'VALIDATION_FAILED', 'webPushTokens[0].sub.keys.auth');
      await rejects(withAuth('!!!!'), 'VALIDATION_FAILED', 'auth');
      await accepts(withAuth(Buffer.alloc(16, 7).toString('base64url')));
    });
  });

  describe('phone numbers (VALIDATION_FAILED), stored as E.164', () => {
    it('accepts unformatted US/Canada forms and international numbers', async () => {
      for (const number of ['(415) 555-0123', '415-555-0123', '14155550123', '+1 415 555 0123', '415.555.0123']) {
        expect((await accepts({ number })).number, number).toBe('+14155550123');
      }
      expect((await accepts({ number: '+15005550006' })).number).toBe('+15005550006');
      expect((await accepts({ number: '+44 20 7946 0958' })).number).toBe('+442079460958');
    });
    it('rejects impossible numbers and text', async () => {
      for (const number of ['123', 'call me', '+1 415 555 0123 ext. 5', '+1415555012345678']) {
        await rejects({ number }, 'VALIDATION_FAILED', 'number');
      }
    });
  });

  describe('email, timezone, ids (VALIDATION_FAILED)', () => {
    it('email syntax and length', async () => {
      await accepts({ email: 'Alice.O+tag@mail.example.co.uk' });
      for (const email of ['not-an-email', 'a b@example.com', 'a@', '@example.com', 'a@exa mple.com', `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.com`]) {
        await rejects({ email }, 'VALIDATION_FAILED', 'email');
      }
    });
    it('timezone is an IANA name', async () => {
      expect((await accepts({ timezone: 'Europe/Paris' })).timezone).toBe('Europe/Paris');
      await accepts({ timezone: 'UTC' });
      for (const timezone of ['Mars/Olympus_Mons', '+02:00', 'GMT+2 hours', 'Europe/']) {
        await rejects({ timezone }, 'VALIDATION_FAILED', 'timezone');
      }
    });
    it('user id is 1 to 256 characters', async () => {
      const identify = (id: string) => service.identify(t.account.accountId, t.account.clientId, { id });
      expect((await identify('i'.repeat(256))).id).toHaveLength(256);
      await expect(identify('i'.repeat(257))).rejects.toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('256') });
      await expect(identify('')).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      const res = await api.identify('u', { id: '' });
      expect(res.status).toBe(400);
    });
    it('slackToken must be an object; wrong scalar types are refused', async () => {
      await rejects({ slackToken: 'xoxb' }, 'VALIDATION_FAILED', 'slackToken');
      await rejects({ pushTokens: { type: 'FCM' } }, 'VALIDATION_FAILED', 'pushTokens');
      await rejects({ email: { address: 'a@example.com' } }, 'VALIDATION_FAILED', 'email');
    });
  });

  describe('upsert from a send recipient', () => {
    const acc = () => [t.account.accountId, t.account.clientId] as const;
    it('uses id, else email, else the E.164 number as the user id', async () => {
      expect((await service.upsertFromRecipient(...acc(), { id: 'r1', email: 'r1@example.com' })).id).toBe('r1');
      expect((await service.upsertFromRecipient(...acc(), { email: 'r2@example.com' })).id).toBe('r2@example.com');
      const byNumber = await service.upsertFromRecipient(...acc(), { number: '(415) 555-0199' });
      expect(byNumber).toMatchObject({ id: '+14155550199', number: '+14155550199' });
      await expect(service.upsertFromRecipient(...acc(), {})).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
      await expect(service.upsertFromRecipient(...acc(), { email: 'bad' })).rejects.toMatchObject({ message: expect.stringContaining('to.email') });
    });
    it('updates provided contact fields but not lastSeenTime of an existing user', async () => {
      const clock = t.deps.clock as ManualClock;
      const first = await service.identify(...acc(), { id: 'r3', email: 'old@example.com', properties: { a: 1 } });
      clock.advance(5000);
      const after = await service.upsertFromRecipient(...acc(), { id: 'r3', email: 'new@example.com' });
      expect(after).toMatchObject({ email: 'new@example.com', properties: { a: 1 }, lastSeenTime: first.lastSeenTime, createdAt: first.createdAt });
      expect(after.updatedAt).not.toBe(first.updatedAt);
      expect(await service.get(...acc(), 'r3')).toEqual(after);
      expect(await service.get(...acc(), 'absent')).toBeNull();
    });
    it("joins the caller's transaction: a rollback leaves no user", async () => {
      const rollback = new Error('rollback');
      await expect(
        t.deps.db.transaction().execute(async (trx) => {
          const user = await service.upsertFromRecipient(...acc(), { id: 'r4', email: 'r4@example.com' }, trx);
          expect(user.email).toBe('r4@example.com');
          throw rollback;
        }),
      ).rejects.toBe(rollback);
      expect(await service.get(...acc(), 'r4')).toBeNull();
      await t.deps.db.transaction().execute((trx) => service.upsertFromRecipient(...acc(), { id: 'r4' }, trx));
      expect(await service.get(...acc(), 'r4')).not.toBeNull();
    });
  });
});

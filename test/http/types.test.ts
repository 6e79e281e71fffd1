import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTO_CREATED_CHANNELS, TypesService } from '../../src/modules/types/types.service.js';
import { draftBody } from '../helpers/broadcasts.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('notification types (%s)', (kind) => {
  let t: TestContext;
  const req = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('creates, reads, lists, updates and deletes a type', async () => {
    const created = await req('POST', '/types', { notificationId: 'welcome', title: 'Welcome', channels: ['EMAIL', 'SMS', 'EMAIL'] });
    expect(created.statusCode).toBe(200);
    expect(created.json()).toEqual({ envId: t.account.clientId, notificationId: 'welcome', title: 'Welcome', channels: ['EMAIL', 'SMS'], enabled: true, templates: [] });

    const one = await req('GET', '/types/welcome');
    expect(one.statusCode).toBe(200);
    expect(one.json()).toEqual([created.json()]);

    const options = { EMAIL: { defaultDeliveryOption: 'off', off: { enabled: true }, daily: { enabled: false, hour: '09:00' } } };
    const patched = await req('PATCH', '/types/welcome', { title: 'Welcome!', enabled: false, channels: ['INAPP_WEB'], options });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ title: 'Welcome!', enabled: false, channels: ['INAPP_WEB'], options });

    // Settings the server cannot honour are refused (docs/preferences.md, docs/throttling.md); null clears them.
    const refused = await req('PATCH', '/types/welcome', { deduplication: { duration: 0.5 } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.message).toContain('deduplication');
    const cleared = await req('PATCH', '/types/welcome', { deduplication: null, throttling: null, retention: null });
    expect(cleared.statusCode).toBe(200);
    expect(cleared.json().deduplication).toBeUndefined();
    expect(cleared.json().throttling).toBeUndefined();
    expect(cleared.json().retention).toBeUndefined();
    expect(cleared.json().title).toBe('Welcome!');

    await req('POST', '/types', { notificationId: 'digest', title: 'Digest', channels: ['EMAIL'] });
    const list = await req('GET', '/types');
    expect(list.json().map((x: { notificationId: string }) => x.notificationId)).toEqual(['welcome', 'digest']);

    const del = await req('DELETE', '/types/digest');
    expect(del.statusCode).toBe(200);
    expect((await req('GET', '/types/digest')).statusCode).toBe(404);
    expect((await req('DELETE', '/types/digest')).statusCode).toBe(404);
  });

  it('manages every type a send or a broadcast creates: a slash in its id, up to 200 characters', async () => {
    const ids = ['orders/shipped', 'x'.repeat(200)];
    for (const type of ids) {
      const sent = await req('POST', '/send', { type, to: { id: 'u-types', email: 'u-types@example.com' }, email: { subject: 's', html: '<p>h</p>' } });
      expect(sent.statusCode, sent.body).toBe(200);
      const path = `/types/${encodeURIComponent(type)}`;
      const [read] = (await req('GET', path)).json();
      expect(read).toMatchObject({ notificationId: type });
      expect((await req('PATCH', path, { title: 'Renamed' })).json()).toMatchObject({ notificationId: type, title: 'Renamed' });
      const template = await req('POST', `/notifications/${encodeURIComponent(type)}/EMAIL/templates`, { templateId: 't1', subject: 's', html: 'h' });
      expect(template.statusCode, template.body).toBe(200);
      expect((await req('DELETE', path)).statusCode).toBe(200);
      expect((await req('GET', path)).statusCode).toBe(404);
    }
    const broadcast = await req('POST', '/broadcasts', draftBody(t, { type: 'news/weekly' }));
    expect(broadcast.statusCode, broadcast.body).toBe(200);
    expect((await req('GET', `/types/${encodeURIComponent('news/weekly')}`)).statusCode).toBe(200);
    // Past 200 characters, a send is refused as the types routes refuse it: no type is created that they cannot reach.
    const long = await req('POST', '/send', { type: 'x'.repeat(201), to: { id: 'u-types' }, inapp: { title: 't' } });
    expect(long.statusCode).toBe(400);
    expect((await req('POST', '/types', { notificationId: 'x'.repeat(201), title: 'T', channels: ['EMAIL'] })).statusCode).toBe(400);
  });

  it('lists template ids per channel and deletes templates with the type', async () => {
    await req('POST', '/types', { notificationId: 'order', title: 'Order', channels: ['EMAIL', 'SMS'] });
    await req('POST', '/notifications/order/EMAIL/templates', { templateId: 'a', subject: 's', html: 'h' });
    await req('POST', '/notifications/order/EMAIL/templates', { templateId: 'b', subject: 's', html: 'h' });
    await req('POST', '/notifications/order/SMS/templates', { templateId: 'sms1', text: 'hi' });
    const [type] = (await req('GET', '/types/order')).json();
    expect(type.templates).toEqual([
      { channel: 'EMAIL', templateIds: ['a', 'b'] },
      { channel: 'SMS', templateIds: ['sms1'] },
    ]);
    expect((await req('DELETE', '/types/order')).statusCode).toBe(200);
    expect((await req('GET', '/notifications/order/EMAIL/templates')).json()).toEqual([]);
    const left = await t.deps.db.withTables<{ templates: { notification_id: string } }>().selectFrom('templates').select('notification_id').where('notification_id', '=', 'order').execute();
    expect(left).toEqual([]);
  });

  it('refuses a duplicate id with CONFLICT and bad bodies with VALIDATION_FAILED', async () => {
    await req('POST', '/types', { notificationId: 'dup', title: 'Dup', channels: [] });
    const dup = await req('POST', '/types', { notificationId: 'dup', title: 'Again', channels: [] });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error).toMatchObject({ code: 'CONFLICT' });
    expect(dup.json().error.fix).toContain('PATCH /types/dup');

    for (const body of [
      { title: 'no id', channels: [] },
      { notificationId: 'x', channels: [] },
      { notificationId: 'x', title: 'x', channels: ['FAX'] },
      { notificationId: 'x', title: 'x', channels: [], throttling: { max: 1, period: 1, unit: 'weeks', forever: false, scope: [] } },
      { notificationId: 'x', title: 'x', channels: [], bogus: 1 },
    ]) {
      const res = await req('POST', '/types', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    expect((await req('PATCH', '/types/nope', { title: 'x' })).json().error.code).toBe('NOT_FOUND');
  });

  it('ensureType creates a missing type once, enabled on every sendable channel, even under concurrent calls', async () => {
    const service = new TypesService(t.deps);
    const results = await Promise.all(Array.from({ length: 8 }, () => service.ensureType(t.account.accountId, t.account.clientId, 'auto-1')));
    for (const r of results) {
      expect(r).toEqual({ envId: t.account.clientId, notificationId: 'auto-1', title: 'auto-1', channels: AUTO_CREATED_CHANNELS, enabled: true });
    }
    expect(AUTO_CREATED_CHANNELS).toEqual(['EMAIL', 'INAPP_WEB', 'SMS', 'CALL', 'PUSH', 'WEB_PUSH', 'SLACK']);
    // An existing type is returned as configured, not reset.
    await req('PATCH', '/types/auto-1', { enabled: false, channels: ['SMS'] });
    expect(await service.ensureType(t.account.accountId, t.account.clientId, 'auto-1')).toMatchObject({ enabled: false, channels: ['SMS'] });
    const list = (await req('GET', '/types')).json().filter((x: { notificationId: string }) => x.notificationId === 'auto-1');
    expect(list).toHaveLength(1);
  });

  it("is isolated per account: another account's key sees nothing and cannot change it", async () => {
    await req('POST', '/types', { notificationId: 'secret-type', title: 'Mine', channels: ['EMAIL'] });
    const other = await t.newAccount();
    const theirs = { authorization: `Bearer ${other.apiKey}` };
    expect((await req('GET', '/types', undefined, theirs)).json()).toEqual([]);
    expect((await req('GET', '/types/secret-type', undefined, theirs)).statusCode).toBe(404);
    expect((await req('PATCH', '/types/secret-type', { title: 'stolen' }, theirs)).statusCode).toBe(404);
    expect((await req('DELETE', '/types/secret-type', undefined, theirs)).statusCode).toBe(404);
    // The same id is free in their environment.
    expect((await req('POST', '/types', { notificationId: 'secret-type', title: 'Theirs', channels: [] }, theirs)).statusCode).toBe(200);
    expect((await req('GET', '/types/secret-type')).json()[0].title).toBe('Mine');
  });
});

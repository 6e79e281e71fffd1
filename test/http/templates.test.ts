import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TemplatesService } from '../../src/modules/templates/templates.service.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const ALL_DEFAULT = { instant: true, hourly: true, daily: true, weekly: true, monthly: true };
const NONE_DEFAULT = { instant: false, hourly: false, daily: false, weekly: false, monthly: false };

describe.each(STORAGE_KINDS)('templates (%s)', (kind) => {
  let t: TestContext;
  let service: TemplatesService;
  const req = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const defaultsOf = async (notificationId: string, channel: string) =>
    Object.fromEntries(
      (await req('GET', `/notifications/${notificationId}/${channel}/templates`)).json<{ templateId: string; default: boolean }[]>().map((x) => [
        x.templateId,
        x.default,
      ]),
    );

  beforeAll(async () => {
    t = await createTestContext(kind);
    service = new TemplatesService(t.deps);
  });
  afterAll(() => t.close());

  it('creates an email template (creating the type), reads, lists and updates it', async () => {
    const created = await req('POST', '/notifications/welcome/EMAIL/templates', {
      templateId: 'main',
      subject: 'Hi {{ user.email }}',
      html: '<p>Hello {{ name }}</p>',
      previewText: 'Hello',
      senderName: 'Clarion',
      senderEmail: 'hello@example.com',
      internal: '{"editor":true}',
    });
    expect(created.statusCode).toBe(200);
    expect(created.json()).toEqual({
      envId: t.account.clientId,
      notificationId: 'welcome',
      templateId: 'main',
      channel: 'EMAIL',
      default: true,
      isDefaultFor: ALL_DEFAULT,
      subject: 'Hi {{ user.email }}',
      html: '<p>Hello {{ name }}</p>',
      previewText: 'Hello',
      senderName: 'Clarion',
      senderEmail: 'hello@example.com',
      internal: '{"editor":true}',
    });
    // The type was created as a send would create it.
    expect((await req('GET', '/types/welcome')).json()[0]).toMatchObject({ notificationId: 'welcome', enabled: true, templates: [{ channel: 'EMAIL', templateIds: ['main'] }] });

    expect((await req('GET', '/notifications/welcome/EMAIL/templates/main')).json()).toEqual(created.json());
    // The path channel is case-insensitive.
    expect((await req('GET', '/notifications/welcome/email/templates/main')).json()).toEqual(created.json());

    const patched = await req('PATCH', '/notifications/welcome/EMAIL/templates/main', { subject: 'New subject' });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toEqual({ ...created.json(), subject: 'New subject' });
    expect((await req('GET', '/notifications/welcome/EMAIL/templates')).json()).toEqual([patched.json()]);
  });

  it('stores the fields of every channel', async () => {
    const cases: [string, Record<string, unknown>][] = [
      ['INAPP_WEB', { title: 'New {{ thing }}', redirectURL: 'https://x.test/a', imageURL: 'https://x.test/i.png', instant: { title: 't', redirectURL: 'r', imageURL: 'i' }, batch: { title: 'b', redirectURL: 'r', imageURL: 'i' } }],
      ['SMS', { text: 'Code {{ code }}', mediaUrls: ['https://x.test/m.png'] }],
      ['CALL', { text: 'Your code is {{ code }}' }],
      ['PUSH', { title: 'T', message: 'M' }],
      ['WEB_PUSH', { title: 'T', message: 'M', icon: 'https://x.test/i.png', url: 'https://x.test' }],
      ['SLACK', { text: 'fallback', blocks: [{ type: 'section', text: { type: 'mrkdwn', text: '*{{ name }}*' } }], username: 'bot', icon: ':bell:' }],
    ];
    for (const [channel, fields] of cases) {
      const res = await req('POST', `/notifications/multi/${channel}/templates`, { templateId: 't1', ...fields });
      expect(res.statusCode, channel).toBe(200);
      expect(res.json(), channel).toEqual({ envId: t.account.clientId, notificationId: 'multi', templateId: 't1', channel, default: true, isDefaultFor: ALL_DEFAULT, ...fields });
    }
    // Lower-case log names are accepted as aliases.
    expect((await req('GET', '/notifications/multi/inapp/templates/t1')).json().channel).toBe('INAPP_WEB');
    expect((await req('GET', '/notifications/multi/mobile_push/templates/t1')).json().channel).toBe('PUSH');
  });

  it('refuses fields of another channel, invalid Liquid, bad channels and duplicates', async () => {
    const wrong = await req('POST', '/notifications/v/SMS/templates', { templateId: 'x', text: 'ok', subject: 'no', html: 'no' });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().error).toMatchObject({ code: 'VALIDATION_FAILED', message: 'Fields subject, html do not apply to SMS templates.', fix: 'SMS templates take text, mediaUrls.' });

    const patchWrong = await req('POST', '/notifications/v/PUSH/templates', { templateId: 'p', title: 't', message: 'm' });
    expect(patchWrong.statusCode).toBe(200);
    const r = await req('PATCH', '/notifications/v/PUSH/templates/p', { url: 'https://x' });
    expect(r.statusCode).toBe(400);
    expect(r.json().error.message).toContain('url');

    const liquid = await req('POST', '/notifications/v/EMAIL/templates', { templateId: 'x', subject: 'Hi {{ name | shout }}', html: '<p/>' });
    expect(liquid.statusCode).toBe(400);
    expect(liquid.json().error.code).toBe('VALIDATION_FAILED');
    expect(liquid.json().error.message).toContain('subject: undefined filter: shout');
    const unclosed = await req('POST', '/notifications/v/EMAIL/templates', { templateId: 'x', html: '{% if a %}' });
    expect(unclosed.json().error.message).toContain('html:');

    for (const channel of ['FAX', 'VOICE']) {
      const res = await req('POST', `/notifications/v/${channel}/templates`, { templateId: 'x', text: 'hi' });
      expect(res.statusCode, channel).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    expect((await req('POST', '/notifications/v/SMS/templates', { text: 'no id' })).statusCode).toBe(400);
    expect((await req('POST', '/notifications/v/SMS/templates', { templateId: 'default-selection', text: 'x' })).statusCode).toBe(400);
    expect((await req('POST', '/notifications/v/SMS/templates', { templateId: 'x', text: 'x', extra: 1 })).statusCode).toBe(400);
    expect((await req('POST', '/notifications/v/INAPP_WEB/templates', { templateId: 'x', batch: { title: 'only title' } })).statusCode).toBe(400);

    expect((await req('POST', '/notifications/v/SMS/templates', { templateId: 'same', text: 'a' })).statusCode).toBe(200);
    const dup = await req('POST', '/notifications/v/SMS/templates', { templateId: 'same', text: 'b' });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error.code).toBe('CONFLICT');
    expect((await req('GET', '/notifications/v/SMS/templates/same')).json().text).toBe('a');
  });

  it('answers 404 for unknown templates', async () => {
    for (const [method, url, body] of [
      ['GET', '/notifications/none/SMS/templates/x', undefined],
      ['PATCH', '/notifications/none/SMS/templates/x', { text: 'x' }],
      ['DELETE', '/notifications/none/SMS/templates/x', undefined],
      ['PATCH', '/notifications/none/SMS/templates/default-selection', { templateId: 'x', modes: ['instant'] }],
    ] as const) {
      const res = await req(method, url, body);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json().error.code).toBe('NOT_FOUND');
    }
    expect((await req('GET', '/notifications/none/SMS/templates')).json()).toEqual([]);
  });

  it('keeps exactly one default: first wins, switching unsets the old one, deleting promotes the oldest', async () => {
    const base = '/notifications/defaults/SMS/templates';
    for (const id of ['a', 'b', 'c']) expect((await req('POST', base, { templateId: id, text: id })).statusCode).toBe(200);
    expect(await defaultsOf('defaults', 'SMS')).toEqual({ a: true, b: false, c: false });

    const switched = await req('PATCH', `${base}/default-selection`, { templateId: 'c', modes: ['instant'] });
    expect(switched.statusCode).toBe(200);
    expect(switched.json()).toMatchObject({ templateId: 'c', default: true, isDefaultFor: { ...NONE_DEFAULT, instant: true } });
    expect(await defaultsOf('defaults', 'SMS')).toEqual({ a: false, b: false, c: true });
    // Other modes stay with the first template.
    expect((await req('GET', `${base}/a`)).json().isDefaultFor).toEqual({ ...ALL_DEFAULT, instant: false });

    // Modes can be set independently; an empty list means instant.
    await req('PATCH', `${base}/default-selection`, { templateId: 'b', modes: ['daily', 'weekly'] });
    expect((await req('GET', `${base}/b`)).json().isDefaultFor).toEqual({ ...NONE_DEFAULT, daily: true, weekly: true });
    await req('PATCH', `${base}/default-selection`, { templateId: 'b', modes: [] });
    expect(await defaultsOf('defaults', 'SMS')).toEqual({ a: false, b: true, c: false });

    // Deleting the default promotes the oldest remaining template for the modes it held.
    expect((await req('DELETE', `${base}/b`)).statusCode).toBe(200);
    expect(await defaultsOf('defaults', 'SMS')).toEqual({ a: true, c: false });
    expect((await req('GET', `${base}/a`)).json().isDefaultFor).toEqual(ALL_DEFAULT);
    // Deleting a non-default leaves the default alone.
    await req('DELETE', `${base}/c`);
    expect(await defaultsOf('defaults', 'SMS')).toEqual({ a: true });
    // Deleting the last one leaves no default; the next template created becomes it.
    await req('DELETE', `${base}/a`);
    expect(await service.resolveTemplate(t.account.accountId, t.account.clientId, 'defaults', 'SMS')).toBeNull();
    await req('POST', base, { templateId: 'd', text: 'd' });
    expect(await defaultsOf('defaults', 'SMS')).toEqual({ d: true });

    // Defaults are per channel.
    await req('POST', '/notifications/defaults/CALL/templates', { templateId: 'a', text: 'call' });
    expect(await defaultsOf('defaults', 'CALL')).toEqual({ a: true });
    expect(await defaultsOf('defaults', 'SMS')).toEqual({ d: true });
  });

  it('concurrent first templates still end with exactly one default', async () => {
    const base = '/notifications/race/PUSH/templates';
    await Promise.all(Array.from({ length: 6 }, (_, i) => req('POST', base, { templateId: `t${i}`, title: 't', message: 'm' })));
    const flags = Object.values(await defaultsOf('race', 'PUSH'));
    expect(flags).toHaveLength(6);
    expect(flags.filter(Boolean)).toHaveLength(1);
  });

  it('resolveTemplate returns the template, the default with a warning, or null', async () => {
    const base = '/notifications/resolve/EMAIL/templates';
    await req('POST', base, { templateId: 'first', subject: 'S1', html: 'H1' });
    await req('POST', base, { templateId: 'second', subject: 'S2', html: 'H2' });
    const a = t.account;
    expect(await service.resolveTemplate(a.accountId, a.clientId, 'resolve', 'EMAIL', 'second')).toEqual({
      templateId: 'second',
      channel: 'EMAIL',
      content: { subject: 'S2', html: 'H2' },
      default: false,
    });
    expect(await service.resolveTemplate(a.accountId, a.clientId, 'resolve', 'EMAIL')).toEqual({
      templateId: 'first',
      channel: 'EMAIL',
      content: { subject: 'S1', html: 'H1' },
      default: true,
    });
    const fallback = await service.resolveTemplate(a.accountId, a.clientId, 'resolve', 'email', 'missing');
    expect(fallback).toMatchObject({ templateId: 'first', default: true });
    expect(fallback?.warning).toContain('"missing" does not exist');
    expect(await service.resolveTemplate(a.accountId, a.clientId, 'resolve', 'SMS')).toBeNull();
    expect(await service.resolveTemplate(a.accountId, a.clientId, 'nothing', 'EMAIL', 'x')).toBeNull();
    // Another account resolves nothing of ours.
    const other = await t.newAccount();
    expect(await service.resolveTemplate(other.accountId, a.clientId, 'resolve', 'EMAIL')).toBeNull();
  });

  it("is isolated per account: another account's key sees nothing and cannot change it", async () => {
    await req('POST', '/notifications/private/SMS/templates', { templateId: 'mine', text: 'secret' });
    const other = await t.newAccount();
    const theirs = { authorization: `Bearer ${other.apiKey}` };
    expect((await req('GET', '/notifications/private/SMS/templates', undefined, theirs)).json()).toEqual([]);
    expect((await req('GET', '/notifications/private/SMS/templates/mine', undefined, theirs)).statusCode).toBe(404);
    expect((await req('PATCH', '/notifications/private/SMS/templates/mine', { text: 'x' }, theirs)).statusCode).toBe(404);
    expect((await req('DELETE', '/notifications/private/SMS/templates/mine', undefined, theirs)).statusCode).toBe(404);
    expect((await req('PATCH', '/notifications/private/SMS/templates/default-selection', { templateId: 'mine', modes: ['instant'] }, theirs)).statusCode).toBe(404);
    expect((await req('GET', '/notifications/private/SMS/templates/mine')).json()).toMatchObject({ text: 'secret', default: true });
  });
});

// Broadcast records over HTTP on both engines: the spec's record with its exact field names,
// creation and changes of drafts with their validation errors (Error body with a fix), the rules
// that bite at schedule and send (subject, type, fromAddress on a verified domain or the default
// sender and its 10 recipients, sendAt in the future by the injected clock), the newest-first
// list with its cursor and archived filter, and isolation between accounts and environments.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callAs, createDraft, draftBody, seedUsers, userRow } from '../helpers/broadcasts.js';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { verifySenderDomain } from '../helpers/sender-domains.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const RECORD_FIELDS = ['broadcastId', 'name', 'status', 'type', 'channel', 'audience', 'fromName', 'fromAddress', 'subject', 'html', 'createdAt', 'updatedAt'];

describe.each(STORAGE_KINDS)('broadcasts (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  const clock = new ManualClock(new Date('2026-03-02T08:00:00.000Z'));
  const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers?: Record<string, string>) => callAs(t, method, url, payload, headers);
  const expectError = (res: { statusCode: number; json(): unknown }, status: number, code: string, message: RegExp) => {
    const body = expectErrorBody(res, status, code, message);
    expect(body.error.fix).toBeTruthy();
    return body;
  };

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(kind, { clock, config: { dnsServer: dns.address, sendingDomain: 'mail.clarion.test' } });
    await verifySenderDomain(t.app, t.auth, dns, 'news.example.test');
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it('creates a draft: the spec record with its exact fields, a UUIDv7 id, its type created; internalTemplate on single reads only', async () => {
    const created = await createDraft(t, { type: 'march-news', replyToAddress: 'replies@news.example.test', internalTemplate: '{"blocks":[]}' });
    expect(Object.keys(created).sort()).toEqual([...RECORD_FIELDS, 'replyToAddress', 'internalTemplate'].sort());
    expect(created).toMatchObject({
      name: 'March newsletter',
      status: 'draft',
      type: 'march-news',
      channel: 'email',
      audience: { filter: { 'properties.plan': 'pro' } },
      fromName: 'Clarion News',
      fromAddress: t.deps.config.defaultFromAddress,
      replyToAddress: 'replies@news.example.test',
      subject: 'What is new in March',
      internalTemplate: '{"blocks":[]}',
      createdAt: clock.now().toISOString(),
      updatedAt: clock.now().toISOString(),
    });
    expect(created.broadcastId).toMatch(UUID_V7);
    const one = await call('GET', `/broadcasts/${created.broadcastId}`);
    expect(one.json()).toEqual(created);
    const listed = (await call('GET', '/broadcasts')).json<{ broadcasts: Record<string, unknown>[] }>().broadcasts.find((b) => b.broadcastId === created.broadcastId)!;
    expect(listed).not.toHaveProperty('internalTemplate');
    expect(listed).toEqual({ ...created, internalTemplate: undefined });
    const type = await call('GET', '/types/march-news');
    expect(type.statusCode).toBe(200);
  });

  it('a draft may hold an empty subject and no type', async () => {
    const { type: _type, ...body } = draftBody(t, { subject: '' });
    const res = await call('POST', '/broadcasts', body);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ subject: '', status: 'draft' });
    expect(res.json()).not.toHaveProperty('type');
  });

  it('validates the body: audience, addresses, internalTemplate, channel, unknown fields', async () => {
    const post = (overrides: Record<string, unknown>) => call('POST', '/broadcasts', draftBody(t, overrides));
    expectError(await post({ audience: { filter: {}, emails: ['a@example.com'] } }), 400, 'VALIDATION_FAILED', /audience must have exactly one of filter and emails; it has both/);
    expectError(await post({ audience: {} }), 400, 'VALIDATION_FAILED', /exactly one of filter and emails; it has neither/);
    expectError(await post({ audience: { emails: ['a@example.com', 'not an address'] } }), 400, 'VALIDATION_FAILED', /audience\.emails\[1\] is not a valid email address/);
    const many = Array.from({ length: 10_001 }, (_, i) => `u${i}@example.com`);
    expectError(await post({ audience: { emails: many } }), 400, 'VALIDATION_FAILED', /audience\.emails has 10001 addresses; at most 10000/);
    expectError(await post({ audience: { filter: { 'properties.plan': { $where: 'x' } } } }), 400, 'VALIDATION_FAILED', /audience\.filter\.properties\.plan\.\$where/);
    expectError(await post({ html: '', internalTemplate: '{}' }), 400, 'VALIDATION_FAILED', /internalTemplate must be paired with html/);
    expectError(await post({ fromAddress: 'nobody' }), 400, 'VALIDATION_FAILED', /fromAddress is not a valid email address/);
    expectErrorBody(await post({ channel: 'sms' }), 400, 'VALIDATION_FAILED', /channel/);
    expectErrorBody(await post({ status: 'sent' }), 400, 'VALIDATION_FAILED', /status/);
    expectErrorBody(await post({ name: '' }), 400, 'VALIDATION_FAILED', /name/);
  });

  it('refuses Liquid that does not parse in the subject or the html, on create and on PATCH, as email templates do', async () => {
    const before = (await call('GET', '/broadcasts')).json<{ broadcasts: unknown[] }>().broadcasts.length;
    expectError(await call('POST', '/broadcasts', draftBody(t, { subject: 's {{ ' })), 400, 'VALIDATION_FAILED', /Invalid Liquid in subject/);
    expectError(await call('POST', '/broadcasts', draftBody(t, { html: '{% if %}' })), 400, 'VALIDATION_FAILED', /Invalid Liquid in html/);
    expect((await call('GET', '/broadcasts')).json<{ broadcasts: unknown[] }>().broadcasts).toHaveLength(before);
    const draft = await createDraft(t, { html: '<p>{{ user.email | upcase }}</p>' });
    expectError(await call('PATCH', `/broadcasts/${draft.broadcastId}`, { html: '<p>{{ user.email | no_such_filter }}</p>' }), 400, 'VALIDATION_FAILED', /Invalid Liquid in html/);
    expect((await call('GET', `/broadcasts/${draft.broadcastId}`)).json()).toMatchObject({ html: '<p>{{ user.email | upcase }}</p>' });
  });

  it('takes a raw list of 10,000 addresses and drops duplicates whatever their case', async () => {
    const list = [...Array.from({ length: 9_997 }, (_, i) => `u${i}@example.com`), 'Ann@Example.com', 'ann@example.com', ' U1@EXAMPLE.COM '];
    const created = await createDraft(t, { audience: { emails: list } });
    const emails = (created.audience as { emails: string[] }).emails;
    expect(emails).toHaveLength(9_998);
    expect(emails.slice(0, 2)).toEqual(['u0@example.com', 'u1@example.com']);
    expect(emails.slice(-1)).toEqual(['Ann@Example.com']);
  });

  it('changes drafts (PATCH): fields, a new type created, type and replyToAddress cleared with null; internalTemplate refused', async () => {
    const draft = await createDraft(t, { replyToAddress: 'r@news.example.test' });
    clock.advance(1000);
    const res = await call('PATCH', `/broadcasts/${draft.broadcastId}`, { name: 'Renamed', subject: 'New subject', type: 'fresh-type', audience: { emails: ['x@example.com'] }, replyToAddress: null });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ name: 'Renamed', subject: 'New subject', type: 'fresh-type', audience: { emails: ['x@example.com'] }, updatedAt: clock.now().toISOString(), createdAt: draft.createdAt });
    expect(res.json()).not.toHaveProperty('replyToAddress');
    expect((await call('GET', '/types/fresh-type')).statusCode).toBe(200);
    const cleared = await call('PATCH', `/broadcasts/${draft.broadcastId}`, { type: null });
    expect(cleared.json()).not.toHaveProperty('type');
    expectError(await call('PATCH', `/broadcasts/${draft.broadcastId}`, { internalTemplate: 'x' }), 400, 'VALIDATION_FAILED', /internalTemplate is settable only when the broadcast is created/);
    expectErrorBody(await call('PATCH', `/broadcasts/${draft.broadcastId}`, { status: 'sent' }), 400, 'VALIDATION_FAILED', /status/);
    expectError(await call('PATCH', `/broadcasts/${draft.broadcastId}`, { audience: { emails: [] , filter: {} } }), 400, 'VALIDATION_FAILED', /both/);
    expectError(await call('PATCH', '/broadcasts/0190f0c0-0000-7000-8000-000000000000', { name: 'x' }), 404, 'NOT_FOUND', /Broadcast "0190f0c0-0000-7000-8000-000000000000" was not found/);
  });

  it('deletes a draft, with its transitions', async () => {
    const draft = await createDraft(t);
    const res = await call('DELETE', `/broadcasts/${draft.broadcastId}`);
    expect([res.statusCode, res.json()]).toEqual([200, { success: true }]);
    expectError(await call('GET', `/broadcasts/${draft.broadcastId}`), 404, 'NOT_FOUND', /was not found/);
    expectError(await call('GET', `/broadcasts/${draft.broadcastId}/transitions`), 404, 'NOT_FOUND', /was not found/);
    expectError(await call('DELETE', `/broadcasts/${draft.broadcastId}`), 404, 'NOT_FOUND', /was not found/);
  });

  it('schedule and send need a subject, a type and an allowed fromAddress (UNVERIFIED_DOMAIN otherwise)', async () => {
    const sendAt = new Date(clock.now().getTime() + 3600_000).toISOString();
    const noSubject = await createDraft(t, { subject: '  ' });
    for (const op of ['send', 'schedule']) {
      expectError(await call('POST', `/broadcasts/${noSubject.broadcastId}/${op}`, op === 'schedule' ? { sendAt } : undefined), 400, 'VALIDATION_FAILED', /subject is empty/);
    }
    const { type: _type, ...untyped } = draftBody(t);
    const noType = (await call('POST', '/broadcasts', untyped)).json<{ broadcastId: string }>();
    for (const op of ['send', 'schedule']) {
      expectError(await call('POST', `/broadcasts/${noType.broadcastId}/${op}`, op === 'schedule' ? { sendAt } : undefined), 400, 'VALIDATION_FAILED', /type is not set/);
    }
    const unverified = await createDraft(t, { fromAddress: 'news@unverified.example.org' });
    for (const op of ['send', 'schedule']) {
      const body = expectError(await call('POST', `/broadcasts/${unverified.broadcastId}/${op}`, op === 'schedule' ? { sendAt } : undefined), 400, 'UNVERIFIED_DOMAIN', /fromAddress "news@unverified\.example\.org" is neither the platform default sender .* unverified\.example\.org is not verified/);
      expect(body.error.fix).toMatch(/POST \/domains \{"sender": "unverified.example.org"\}/);
    }
    expect((await call('GET', `/broadcasts/${unverified.broadcastId}`)).json().status).toBe('draft');
    const verified = await createDraft(t, { fromAddress: 'News@News.Example.test' });
    expect((await call('POST', `/broadcasts/${verified.broadcastId}/schedule`, { sendAt })).json()).toMatchObject({ status: 'scheduled', scheduleAt: sendAt });
  });

  it('sendAt must be in the future by the server clock, within a year, and a real date-time', async () => {
    const draft = await createDraft(t);
    const at = (ms: number) => new Date(clock.now().getTime() + ms).toISOString();
    expectError(await call('POST', `/broadcasts/${draft.broadcastId}/schedule`, { sendAt: at(0) }), 400, 'VALIDATION_FAILED', /sendAt 2026-.* is not in the future \(it is now 2026-/);
    expectError(await call('POST', `/broadcasts/${draft.broadcastId}/schedule`, { sendAt: at(-60_000) }), 400, 'VALIDATION_FAILED', /is not in the future/);
    expectError(await call('POST', `/broadcasts/${draft.broadcastId}/schedule`, { sendAt: at(367 * 86_400_000) }), 400, 'VALIDATION_FAILED', /more than one year ahead/);
    expectErrorBody(await call('POST', `/broadcasts/${draft.broadcastId}/schedule`, { sendAt: '2026-02-30T10:00:00Z' }), 400, 'VALIDATION_FAILED', /sendAt/);
    expectErrorBody(await call('POST', `/broadcasts/${draft.broadcastId}/schedule`, {}), 400, 'VALIDATION_FAILED', /sendAt/);
    const ok = await call('POST', `/broadcasts/${draft.broadcastId}/schedule`, { sendAt: at(1) });
    expect(ok.json()).toMatchObject({ status: 'scheduled', scheduleAt: at(1) });
  });

  it('the platform default sender sends to at most 10 users', async () => {
    await seedUsers(t, Array.from({ length: 11 }, (_, i) => userRow(t, `ten-${i}`, { email: `ten-${i}@example.com`, properties: '{"cohort":"ten"}' })));
    const over = await createDraft(t, { audience: { filter: { 'properties.cohort': 'ten' } } });
    expectError(await call('POST', `/broadcasts/${over.broadcastId}/send`), 400, 'VALIDATION_FAILED', /The audience holds 11 users; the platform default sender .* at most 10/);
    const listed = await createDraft(t, { audience: { emails: Array.from({ length: 11 }, (_, i) => `l${i}@example.com`) } });
    expectError(await call('POST', `/broadcasts/${listed.broadcastId}/schedule`, { sendAt: new Date(clock.now().getTime() + 60_000).toISOString() }), 400, 'VALIDATION_FAILED', /holds 11 users/);
    const fromDomain = await createDraft(t, { audience: { filter: { 'properties.cohort': 'ten' } }, fromAddress: 'news@news.example.test' });
    expect((await call('POST', `/broadcasts/${fromDomain.broadcastId}/send`)).json().status).toBe('sending');
    const ten = await createDraft(t, { audience: { filter: { 'properties.cohort': 'ten', id: { $ne: 'ten-0' } } } });
    expect((await call('POST', `/broadcasts/${ten.broadcastId}/send`)).json().status).toBe('sending');
  });

  it('lists newest first with a cursor; archived ones only with ?archived=true', async () => {
    const other = await t.newAccount('List account');
    const auth = { authorization: `Bearer ${other.apiKey}` };
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await createDraft(t, { name: `n${i}` }, auth));
    await call('POST', `/broadcasts/${made[1].broadcastId}/archive`, undefined, auth);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await call('GET', `/broadcasts?limit=2${cursor ? `&cursor=${cursor}` : ''}`, undefined, auth);
      const body = page.json<{ broadcasts: { name: string }[]; nextCursor?: string }>();
      expect(body.broadcasts.length).toBeLessThanOrEqual(2);
      seen.push(...body.broadcasts.map((b) => b.name));
      cursor = body.nextCursor;
    } while (cursor);
    expect(seen).toEqual(['n4', 'n3', 'n2', 'n0']);
    const all = (await call('GET', '/broadcasts?archived=true', undefined, auth)).json<{ broadcasts: { name: string; archivedAt?: string }[] }>().broadcasts;
    expect(all.map((b) => b.name)).toEqual(['n4', 'n3', 'n2', 'n1', 'n0']);
    expect(all[3].archivedAt).toBe(clock.now().toISOString());
    expectErrorBody(await call('GET', '/broadcasts?limit=0', undefined, auth), 400, 'VALIDATION_FAILED', /limit/);
    // A cursor this list never gave is refused, not read as the first page.
    for (const bad of ['garbage', made[2].broadcastId.toUpperCase(), `${made[2].broadcastId}x`]) {
      expectErrorBody(await call('GET', `/broadcasts?cursor=${bad}`, undefined, auth), 400, 'VALIDATION_FAILED', /cursor is not a cursor of this list/);
    }
    expect((await call('GET', '/broadcasts?cursor=', undefined, auth)).json<{ broadcasts: unknown[] }>().broadcasts).toHaveLength(4);
  });

  it('another account or environment never sees nor changes a broadcast', async () => {
    const draft = await createDraft(t);
    const stranger = await t.newAccount('Stranger');
    const env2 = (await call('POST', '/environments', { title: 'Second' })).json<{ clientId: string; clientSecret: string }>();
    const others = [
      { authorization: `Bearer ${stranger.apiKey}` },
      { authorization: `Basic ${Buffer.from(`${env2.clientId}:${env2.clientSecret}`).toString('base64')}` },
    ];
    for (const headers of others) {
      for (const [method, path] of [
        ['GET', ''],
        ['PATCH', ''],
        ['DELETE', ''],
        ['POST', '/send'],
        ['POST', '/archive'],
        ['POST', '/cancel'],
        ['GET', '/metrics'],
        ['GET', '/recipients'],
        ['GET', '/transitions'],
      ] as const) {
        const res = await call(method, `/broadcasts/${draft.broadcastId}${path}`, method === 'PATCH' ? { name: 'stolen' } : undefined, headers);
        expectError(res, 404, 'NOT_FOUND', /was not found in this environment/);
      }
      const list = (await call('GET', '/broadcasts?archived=true', undefined, headers)).json<{ broadcasts: { broadcastId: string }[] }>();
      expect(list.broadcasts.map((b) => b.broadcastId)).not.toContain(draft.broadcastId);
    }
    expect((await call('GET', `/broadcasts/${draft.broadcastId}`)).json()).toMatchObject({ name: 'March newsletter', status: 'draft' });
  });
});

// Audiences on both engines: POST /broadcasts/audience/preview (size and sample, for a filter in
// SQL and for one mingo decides over pages, and for a list), and the freeze that writes a sending
// broadcast's audience into recipient rows: skipped users counted by why (no email, suppressed,
// bounced, unsubscribed from the type), listed addresses becoming users, keyset pages of
// recipients by state, a freeze resumed page by page and run twice at once without duplicates,
// and cancel skipping whoever is still pending.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { USER_PAGE } from '../../src/modules/broadcasts/audience.service.js';
import { callAs, createDraft, seedUsers, userRow } from '../helpers/broadcasts.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type DnsTestServer, startDnsServer } from '../helpers/dns-server.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { verifySenderDomain } from '../helpers/sender-domains.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const BULK = USER_PAGE * 2 + 300;
type Recipient = { userId: string; email?: string; state: string; skipReason?: string };

describe.each(STORAGE_KINDS)('broadcast audiences (%s)', (kind) => {
  let t: TestContext;
  let dns: DnsTestServer;
  const scope = () => ({ accountId: t.account.accountId, envId: t.account.clientId });
  const call = (method: 'GET' | 'POST', url: string, payload?: unknown) => callAs(t, method, url, payload);
  const preview = async (audience: unknown) => {
    const res = await call('POST', '/broadcasts/audience/preview', { audience });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ size: number; sample: { id: string; email?: string; properties?: Record<string, unknown> }[] }>();
  };
  /** Sends a draft from the verified domain and freezes its whole audience. */
  const sendAndFreeze = async (overrides: Record<string, unknown>) => {
    const { broadcastId: id } = await createDraft(t, { fromAddress: 'news@bulk.example.test', ...overrides });
    expect((await call('POST', `/broadcasts/${id}/send`)).statusCode).toBe(200);
    expect(await t.services.broadcasts.sending.freeze(scope(), id, 100)).toBe('done');
    return id;
  };
  const allRecipients = async (id: string, query = '') => {
    const seen: Recipient[] = [];
    let cursor: string | undefined;
    do {
      const res = await call('GET', `/broadcasts/${id}/recipients?limit=400${query}${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json<{ recipients: Recipient[]; nextCursor?: string }>();
      seen.push(...body.recipients);
      cursor = body.nextCursor;
    } while (cursor);
    return seen;
  };
  const metrics = async (id: string) => (await call('GET', `/broadcasts/${id}/metrics`)).json<{ total: number; counts: Record<string, number>; skipped: Record<string, number>; rates: Record<string, number> }>();

  beforeAll(async () => {
    dns = await startDnsServer();
    t = await createTestContext(kind, { config: { dnsServer: dns.address, sendingDomain: 'mail.clarion.test' } });
    await verifySenderDomain(t.app, t.auth, dns, 'bulk.example.test');
    const bulk = Array.from({ length: BULK }, (_, i) =>
      userRow(t, `bulk-${String(i).padStart(5, '0')}`, { email: i % 7 === 0 ? `bulk-${i}@Special.example.com` : `bulk-${i}@example.com`, properties: JSON.stringify({ cohort: 'bulk', n: i }) }),
    );
    await seedUsers(t, bulk);
    await seedUsers(t, [
      userRow(t, 'ok-1', { email: 'ok-1@example.com', properties: '{"cohort":"mixed"}' }),
      userRow(t, 'ok-2', { email: 'ok-2@example.com', properties: '{"cohort":"mixed"}' }),
      userRow(t, 'no-email', { number: '+15005550006', properties: '{"cohort":"mixed"}' }),
      userRow(t, 'bounced', { email: 'bounced@example.com', properties: '{"cohort":"mixed"}' }),
      userRow(t, 'complained', { email: 'complained@example.com', properties: '{"cohort":"mixed"}' }),
      userRow(t, 'unsubscribed', { email: 'unsub@example.com', properties: '{"cohort":"mixed"}' }),
      userRow(t, 'known-by-email', { email: 'known@example.com' }),
    ]);
    await t.services.users.setSuppression(t.account.accountId, t.account.clientId, 'bounced', 'EMAIL', { reason: 'Bounce', details: { diagnosticCode: '550 5.1.1' } });
    await t.services.users.setSuppression(t.account.accountId, t.account.clientId, 'complained', 'EMAIL', { reason: 'Complaint', details: {} });
    expect((await call('POST', '/types', { notificationId: 'newsletter', title: 'Newsletter', channels: ['EMAIL'] })).statusCode).toBeLessThan(300);
    await t.services.preferences.set(scope(), 'unsubscribed', [{ notificationId: 'newsletter', channel: 'EMAIL', delivery: 'off' }], 'api');
    // Another environment's user that every filter below would match.
    const other = await t.newAccount();
    await seedUsers(t, [userRow({ account: other }, 'ok-1', { email: 'ok-1@example.com', properties: '{"cohort":"mixed","n":1}' })]);
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it('previews a filter: its size now and up to 10 users in id order', async () => {
    const mixed = await preview({ filter: { 'properties.cohort': 'mixed' } });
    expect(mixed.size).toBe(6);
    expect(mixed.sample.map((u) => u.id)).toEqual(['bounced', 'complained', 'no-email', 'ok-1', 'ok-2', 'unsubscribed']);
    expect(mixed.sample[3]).toMatchObject({ id: 'ok-1', email: 'ok-1@example.com', properties: { cohort: 'mixed' } });
    const ranged = await preview({ filter: { 'properties.cohort': 'bulk', 'properties.n': { $gte: 100, $lt: 1600 } } });
    expect(ranged.size).toBe(1500);
    expect(ranged.sample).toHaveLength(10);
    expect(ranged.sample[0].id).toBe('bulk-00100');
  });

  it('previews a $regex filter that mingo decides, across pages of users', async () => {
    const special = await preview({ filter: { email: { $regex: '@special\\.', $options: 'i' } } });
    expect(special.size).toBe(Math.ceil(BULK / 7));
    expect(special.sample.map((u) => u.id).slice(0, 2)).toEqual(['bulk-00000', 'bulk-00007']);
    expect((await preview({ filter: { email: { $regex: '@special\\.' } } })).size).toBe(0);
  });

  it('previews a list: its distinct addresses, known users as they are, others as the users they will become', async () => {
    const list = await preview({ emails: ['known@example.com', 'new@example.com', 'NEW@example.com'] });
    expect(list.size).toBe(2);
    expect(list.sample).toEqual([expect.objectContaining({ id: 'known-by-email', email: 'known@example.com' }), { id: 'new@example.com', email: 'new@example.com' }]);
    expectErrorBody(await call('POST', '/broadcasts/audience/preview', { audience: { filter: { $where: '1' } } }), 400, 'VALIDATION_FAILED', /audience\.filter\.\$where/);
    expectErrorBody(await call('POST', '/broadcasts/audience/preview', { audience: {} }), 400, 'VALIDATION_FAILED', /exactly one of filter and emails/);
  });

  it('freezes a filter audience: pending recipients, and skipped ones counted by why', async () => {
    const id = await sendAndFreeze({ audience: { filter: { 'properties.cohort': 'mixed' } } });
    const recipients = await allRecipients(id);
    expect(recipients.map((r) => [r.userId, r.state, r.skipReason ?? null])).toEqual([
      ['bounced', 'skipped', 'BOUNCED'],
      ['complained', 'skipped', 'SUPPRESSED'],
      ['no-email', 'skipped', 'NO_EMAIL'],
      ['ok-1', 'pending', null],
      ['ok-2', 'pending', null],
      ['unsubscribed', 'skipped', 'UNSUBSCRIBED'],
    ]);
    expect(recipients[3].email).toBe('ok-1@example.com');
    const m = await metrics(id);
    expect(m).toMatchObject({ total: 6, skipped: { BOUNCED: 1, SUPPRESSED: 1, NO_EMAIL: 1, UNSUBSCRIBED: 1 } });
    expect(m.counts).toEqual({ pending: 2, sent: 0, delivered: 0, failed: 0, bounced: 0, opened: 0, clicked: 0, unsubscribed: 0, skipped: 4 });
    expect(m.rates).toEqual({ delivery: 0, open: 0, click: 0, bounce: 0, failure: 0, unsubscribe: 0 });
    expect((await allRecipients(id, '&state=skipped')).map((r) => r.userId)).toEqual(['bounced', 'complained', 'no-email', 'unsubscribed']);
    expect((await call('GET', `/broadcasts/${id}`)).json().status).toBe('sending');
  });

  it('freezes a list: known addresses are their users, unknown ones become users', async () => {
    const id = await sendAndFreeze({ audience: { emails: ['known@example.com', 'fresh-1@example.com', 'unsub@example.com', 'fresh-2@example.com'] } });
    const recipients = await allRecipients(id);
    expect(recipients.map((r) => [r.userId, r.email, r.state])).toEqual([
      ['known-by-email', 'known@example.com', 'pending'],
      ['fresh-1@example.com', 'fresh-1@example.com', 'pending'],
      ['unsubscribed', 'unsub@example.com', 'skipped'],
      ['fresh-2@example.com', 'fresh-2@example.com', 'pending'],
    ]);
    const created = await call('GET', `/users/${encodeURIComponent('fresh-1@example.com')}`);
    expect(created.statusCode).toBe(200);
    expect(created.json()).toMatchObject({ id: 'fresh-1@example.com', email: 'fresh-1@example.com' });
  });

  it('freezes a large audience page by page: a run resumes where the last stopped, two runs at once write each user once', async () => {
    const filter = { 'properties.cohort': 'bulk' };
    const { broadcastId: id } = await createDraft(t, { fromAddress: 'news@bulk.example.test', audience: { filter } });
    await call('POST', `/broadcasts/${id}/send`);
    expect(await t.services.broadcasts.sending.freeze(scope(), id, 1)).toBe('more');
    expect((await metrics(id)).total).toBe(USER_PAGE);
    expect(await t.services.broadcasts.sending.freeze(scope(), id, 1)).toBe('more');
    expect((await metrics(id)).total).toBe(2 * USER_PAGE);
    // The last page is short: it is the last.
    expect(await t.services.broadcasts.sending.freeze(scope(), id, 1)).toBe('done');
    const recipients = await allRecipients(id, '&state=pending');
    expect(recipients).toHaveLength(BULK);
    expect(recipients.map((r) => r.userId)).toEqual(Array.from({ length: BULK }, (_, i) => `bulk-${String(i).padStart(5, '0')}`));

    const { broadcastId: twice } = await createDraft(t, { fromAddress: 'news@bulk.example.test', audience: { filter: { ...filter, email: { $regex: 'special', $options: 'i' } } } });
    await call('POST', `/broadcasts/${twice}/send`);
    await Promise.all([t.services.broadcasts.sending.freeze(scope(), twice, 100), t.services.broadcasts.sending.freeze(scope(), twice, 100)]);
    const special = await allRecipients(twice);
    expect(special).toHaveLength(Math.ceil(BULK / 7));
    expect(new Set(special.map((r) => r.userId)).size).toBe(special.length);
  });

  it('cancel skips whoever is still pending', async () => {
    const id = await sendAndFreeze({ audience: { filter: { 'properties.cohort': 'mixed' } } });
    const canceled = await call('POST', `/broadcasts/${id}/cancel`);
    expect(canceled.json().status).toBe('canceled');
    const m = await metrics(id);
    expect(m.counts).toMatchObject({ pending: 0, skipped: 6 });
    expect(m.skipped).toMatchObject({ CANCELED: 2, BOUNCED: 1 });
    // A freeze still running when the cancel came skips what it wrote after.
    const { broadcastId: midway } = await createDraft(t, { fromAddress: 'news@bulk.example.test', audience: { filter: { 'properties.cohort': 'bulk' } } });
    await call('POST', `/broadcasts/${midway}/send`);
    expect(await t.services.broadcasts.sending.freeze(scope(), midway, 1)).toBe('more');
    await call('POST', `/broadcasts/${midway}/cancel`);
    expect(await t.services.broadcasts.sending.freeze(scope(), midway, 1)).toBe('done');
    expect((await metrics(midway)).counts).toMatchObject({ pending: 0, skipped: USER_PAGE });
  });

  it('pages recipients with a cursor and refuses a cursor it did not make', async () => {
    const id = await sendAndFreeze({ audience: { filter: { 'properties.cohort': 'mixed' } } });
    const first = (await call('GET', `/broadcasts/${id}/recipients?limit=4`)).json<{ recipients: Recipient[]; nextCursor: string }>();
    expect(first.recipients).toHaveLength(4);
    const second = (await call('GET', `/broadcasts/${id}/recipients?limit=4&cursor=${first.nextCursor}`)).json<{ recipients: Recipient[]; nextCursor?: string }>();
    expect(second.recipients.map((r) => r.userId)).toEqual(['ok-2', 'unsubscribed']);
    expect(second.nextCursor).toBeUndefined();
    // Past PostgreSQL's integer column (seq) too: refused, not a 500.
    for (const bad of ['abc', '2147483648', '999999999999999']) {
      expectErrorBody(await call('GET', `/broadcasts/${id}/recipients?cursor=${bad}`), 400, 'VALIDATION_FAILED', /cursor is not a cursor of this list/);
    }
    expect((await call('GET', `/broadcasts/${id}/recipients?cursor=2147483647`)).json()).toEqual({ recipients: [] });
    expectErrorBody(await call('GET', `/broadcasts/${id}/recipients?state=gone`), 400, 'VALIDATION_FAILED', /state/);
  });
});

// The send intake under concurrency: sends that arrive together are committed together (one
// group commit), and each still succeeds or fails on its own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, type TestContext, createTestContext } from '../helpers/context.js';
import { countAcceptedSends } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('send intake under concurrency (%s)', (kind) => {
  let t: TestContext;
  // Moved by hand between sends whose timestamps the test compares.
  const clock = new ManualClock(new Date('2026-01-15T10:00:00.000Z'));
  const send = (payload: unknown, headers: Record<string, string> = {}, auth = t.auth) =>
    t.app.inject({ method: 'POST', url: '/send', headers: { ...auth, ...headers }, payload: payload as object });
  const count = async (table: string, where: Record<string, string>) => {
    if (table === 'messages') return countAcceptedSends(t.deps, where);
    let q = t.deps.db.selectFrom(table as never).select((eb) => eb.fn.countAll().as('n'));
    for (const [column, value] of Object.entries(where)) q = q.where(column as never, '=', value as never);
    return Number(((await q.executeTakeFirstOrThrow()) as { n: number | string }).n);
  };
  const user = (id: string) => t.app.inject({ method: 'GET', url: `/users/${id}`, headers: t.auth }).then((r) => r.json());

  beforeAll(async () => {
    t = await createTestContext(kind, { clock });
  });
  afterAll(() => t.close());

  it('answers one trackingId to concurrent sends with the same Idempotency-Key, and stores one message', async () => {
    const body = { type: 'intake_idem', to: { id: 'idem-user' }, inapp: { title: 'once' } };
    const answers = await Promise.all(Array.from({ length: 20 }, () => send(body, { 'idempotency-key': 'same-key' })));
    expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(200));
    const ids = new Set(answers.map((a) => a.json().trackingId));
    expect(ids.size).toBe(1);
    expect(await count('messages', { notification_id: 'intake_idem' })).toBe(1);
  });

  it('counts concurrent sends against messagesCap exactly: the rest answer 402 and write nothing', async () => {
    const capped = await t.newAccount('Capped');
    await t.deps.db.updateTable('accounts' as never).set({ messages_cap: 5 } as never).where('id' as never, '=', capped.accountId as never).execute();
    const auth = { authorization: `Bearer ${capped.apiKey}` };
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => send({ type: 'intake_cap', to: { id: `cap-${i}` }, inapp: { title: 'x' } }, {}, auth)),
    );
    const statuses = answers.map((a) => a.statusCode).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 402)).toHaveLength(7);
    for (const over of answers.filter((a) => a.statusCode === 402)) expect(over.json().error.code).toBe('USAGE_LIMIT_EXCEEDED');
    expect(await count('messages', { account_id: capped.accountId })).toBe(5);
    // Refused sends create no user either: each unit rolled back alone.
    expect(await count('users', { account_id: capped.accountId })).toBe(5);
  });

  it('fails only the send whose recipient cannot be merged, not the others committed with it', async () => {
    // 4 properties of 240 characters: about 1 KB, just under the limit.
    const properties = Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`p${i}`, 'v'.repeat(240)]));
    expect((await t.app.inject({ method: 'POST', url: '/users/full-user', headers: t.auth, payload: { properties } })).statusCode).toBe(200);
    const answers = await Promise.all([
      send({ type: 'intake_mixed', to: { id: 'ok-1' }, inapp: { title: 'a' } }),
      // Valid on its own, over 1 KB once merged with the stored properties.
      send({ type: 'intake_mixed', to: { id: 'full-user', properties: { extra: 'x'.repeat(200) } }, inapp: { title: 'b' } }),
      send({ type: 'intake_mixed', to: { id: 'ok-2' }, inapp: { title: 'c' } }),
    ]);
    expect(answers.map((a) => a.statusCode)).toEqual([200, 400, 200]);
    expect(answers[1].json().error.code).toBe('PROPERTY_LIMIT_EXCEEDED');
    expect(await count('messages', { notification_id: 'intake_mixed' })).toBe(2);
    expect((await user('full-user')).properties).toEqual(properties);
  });

  it('gives concurrent sends with one Idempotency-Key the same refusal when the send is refused, not a 409', async () => {
    const properties = Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`p${i}`, 'v'.repeat(240)]));
    expect((await t.app.inject({ method: 'POST', url: '/users/full-idem', headers: t.auth, payload: { properties } })).statusCode).toBe(200);
    const body = { type: 'intake_idem_refused', to: { id: 'full-idem', properties: { extra: 'x'.repeat(200) } }, inapp: { title: 'b' } };
    const answers = await Promise.all(Array.from({ length: 20 }, () => send(body, { 'idempotency-key': 'refused-key' })));
    expect(answers.map((a) => `${a.statusCode} ${a.json().error?.code}`)).toEqual(Array(20).fill('400 PROPERTY_LIMIT_EXCEEDED'));
    // A refusal is not remembered: the key sends once the user is fixed.
    expect((await t.app.inject({ method: 'POST', url: '/users/full-idem', headers: t.auth, payload: { properties: { p0: null } } })).statusCode).toBe(200);
    expect((await send(body, { 'idempotency-key': 'refused-key' })).statusCode).toBe(200);
  });

  it('upserts the recipient: creates it once, updates provided fields, and leaves an unchanged user as it was', async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => send({ type: 'intake_user', to: { id: 'fresh', email: 'fresh@example.com' }, inapp: { title: 'x' } })),
    );
    expect(answers.map((a) => a.statusCode)).toEqual(Array(10).fill(200));
    expect(await count('users', { id: 'fresh' })).toBe(1);
    const first = await user('fresh');
    expect(first.email).toBe('fresh@example.com');

    clock.advance(1000);
    expect((await send({ type: 'intake_user', to: { id: 'fresh', email: 'fresh@example.com' }, inapp: { title: 'x' } })).statusCode).toBe(200);
    expect((await user('fresh')).updatedAt).toBe(first.updatedAt);

    clock.advance(1000);
    expect((await send({ type: 'intake_user', to: { id: 'fresh', number: '+14155550123' }, inapp: { title: 'x' } })).statusCode).toBe(200);
    const changed = await user('fresh');
    expect(changed).toMatchObject({ email: 'fresh@example.com', number: '+14155550123', lastSeenTime: first.lastSeenTime });
    expect(changed.updatedAt > first.updatedAt).toBe(true);
    // The message carries the contact data the user had when it was accepted.
    const log = (await t.app.inject({ method: 'GET', url: `/logs/${answers[0].json().trackingId}`, headers: t.auth })).json().logs[0];
    expect(log.user_email).toBe('fresh@example.com');
  });
});

// The one bulk intake: many sends in one accept() call, each with its own outcome, and a send
// visible to every reader the moment it is accepted, without any worker or wait.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { countAcceptedSends } from '../helpers/sends.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type IntakeUnit, SendIntake } from '../../src/modules/sending/intake.js';
import { LogsService } from '../../src/modules/logs/logs.service.js';
import { parseRecipient } from '../../src/modules/users/users.service.js';
import { queuedMessageRow } from '../helpers/rows.js';

describe.each(STORAGE_KINDS)('bulk intake (%s)', (kind) => {
  let t: TestContext;
  beforeEach(async () => {
    t = await createTestContext(kind);
  });
  afterEach(() => t.close());

  const cycleStart = '2026-01-01T00:00:00.000Z';
  const now = new Date().toISOString();
  /** One send as SendingService builds it; `key` adds an Idempotency-Key. */
  const unit = (trackingId: string, to: Record<string, unknown>, options: { key?: string; cap?: number } = {}): IntakeUnit => {
    const { accountId, clientId: envId } = t.account;
    const recipient = parseRecipient(to);
    const request = JSON.stringify({ type: 'bulk_type', to, inapp: { title: 'hi' } });
    return {
      accountId,
      envId,
      now,
      idempotency: options.key
        ? { env_id: envId, key: options.key, request_hash: `hash-${options.key}`, tracking_id: trackingId, response: JSON.stringify({ trackingId, messages: [] }), created_at: now }
        : null,
      usage: { cycleStart, cap: options.cap ?? 1000 },
      recipient,
      ensureType: 'bulk_type',
      job: { name: 'message.process', data: { trackingId }, runAt: null },
      message: queuedMessageRow({
        tracking_id: trackingId,
        account_id: accountId,
        env_id: envId,
        notification_id: 'bulk_type',
        user_id: recipient.userId,
        request,
        received_at: now,
      }),
    };
  };
  const count = async (table: string, where: Record<string, string>) => {
    let q = t.deps.db.selectFrom(table as never).select((eb) => eb.fn.countAll().as('n'));
    for (const [column, value] of Object.entries(where)) q = q.where(column as never, '=', value as never);
    return Number(((await q.executeTakeFirstOrThrow()) as { n: number | string }).n);
  };

  it('settles each unit of one call on its own: replays, one over the cap and a refused merge, while the others commit', async () => {
    const { accountId, clientId: envId } = t.account;
    // A key held by an earlier send, and a user whose properties are just under the limit.
    await t.deps.db
      .insertInto('idempotency_keys' as never)
      .values({ env_id: envId, key: 'held', request_hash: 'h', tracking_id: 'earlier', response: '{}', created_at: now })
      .execute();
    const properties = Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`p${i}`, 'v'.repeat(240)]));
    expect((await t.app.inject({ method: 'POST', url: '/users/full-user', headers: t.auth, payload: { properties } })).statusCode).toBe(200);

    // Five sends fit the cap; the sixth that is not refused otherwise is over it.
    const cap = 5;
    const units = [
      unit('t-01', { id: 'bulk-1', email: 'b1@example.com' }, { key: 'k-1', cap }),
      unit('t-02', { id: 'bulk-2' }, { key: 'held', cap }),
      unit('t-03', { id: 'bulk-3' }, { key: 'k-1', cap }),
      unit('t-04', { id: 'full-user', properties: { extra: 'x'.repeat(200) } }, { key: 'k-merge', cap }),
      unit('t-05', { id: 'bulk-1', number: '+14155550123' }, { cap }),
      ...['t-06', 't-07', 't-08'].map((id, i) => unit(id, { id: `bulk-many-${i}` }, { cap })),
      unit('t-09', { id: 'bulk-over' }, { key: 'k-over', cap }),
    ];
    const outcomes = await new SendIntake(t.deps, t.deps.queue).accept(units);

    expect(outcomes.map((o) => (o.ok ? o.value : 'error'))).toEqual(['ok', 'replay', 'replay', 'error', 'ok', 'ok', 'ok', 'ok', 'cap']);
    const refused = outcomes[3] as { ok: false; error: { code?: string } };
    expect(refused.error.code).toBe('PROPERTY_LIMIT_EXCEEDED');

    expect(await countAcceptedSends(t.deps, { account_id: accountId })).toBe(5);
    const used = (await t.deps.db.selectFrom('usage_counters' as never).select('messages' as never).where('account_id' as never, '=', accountId as never).executeTakeFirstOrThrow()) as {
      messages: number;
    };
    expect(used.messages).toBe(5);
    // Refused units hold no key and wrote no user; the committed ones did, merged in order.
    const keys = (await t.deps.db.selectFrom('idempotency_keys' as never).select(['key', 'tracking_id'] as never).where('env_id' as never, '=', envId as never).orderBy('key' as never).execute()) as {
      key: string;
      tracking_id: string;
    }[];
    expect(keys).toEqual([
      { key: 'held', tracking_id: 'earlier' },
      { key: 'k-1', tracking_id: 't-01' },
    ]);
    expect(await count('users', { account_id: accountId, id: 'bulk-2' })).toBe(0);
    expect(await count('users', { account_id: accountId, id: 'bulk-over' })).toBe(0);
    const user = (await t.app.inject({ method: 'GET', url: '/users/bulk-1', headers: t.auth })).json();
    expect(user).toMatchObject({ id: 'bulk-1', email: 'b1@example.com', number: '+14155550123' });
    const full = (await t.app.inject({ method: 'GET', url: '/users/full-user', headers: t.auth })).json();
    expect(full.properties).toEqual(properties);
    expect(await count('notification_types', { account_id: accountId, notification_id: 'bulk_type' })).toBe(1);
    // The committed sends are readable by id at once, with the recipient's stored contact.
    const logs = (await t.app.inject({ method: 'GET', url: '/logs/t-01,t-05,t-09', headers: t.auth })).json().logs as Record<string, unknown>[];
    expect(logs.map((l) => l.trackingId).sort()).toEqual(['t-01', 't-05']);
    expect(logs.find((l) => l.trackingId === 't-05')).toMatchObject({ user_email: 'b1@example.com' });
  });

  it('counts against the cap exactly when another process counted since this one last did: the batch is redone from a read', async () => {
    const { accountId } = t.account;
    const cap = 6;
    // Two intakes: two processes sharing the database.
    const first = new SendIntake(t.deps, t.deps.queue);
    const second = new SendIntake(t.deps, t.deps.queue);
    const values = (outcomes: { ok: boolean; value?: unknown }[]) => outcomes.map((o) => (o.ok ? o.value : 'error'));
    // The first counts 2 and keeps that count; the second then counts 3 (5 of 6 used).
    expect(values(await first.accept([unit('c-01', { id: 'cap-1' }, { cap }), unit('c-02', { id: 'cap-1' }, { cap })]))).toEqual(['ok', 'ok']);
    expect(values(await second.accept(['c-03', 'c-04', 'c-05'].map((id) => unit(id, { id: 'cap-1' }, { cap }))))).toEqual(['ok', 'ok', 'ok']);
    // By its own last count the first has room for 3 more; only one is left.
    expect(values(await first.accept(['c-06', 'c-07', 'c-08'].map((id) => unit(id, { id: 'cap-1' }, { cap }))))).toEqual(['ok', 'cap', 'cap']);
    expect(await countAcceptedSends(t.deps, { account_id: accountId })).toBe(6);
    const used = (await t.deps.db.selectFrom('usage_counters' as never).select('messages' as never).where('account_id' as never, '=', accountId as never).executeTakeFirstOrThrow()) as {
      messages: number;
    };
    expect(used.messages).toBe(6);
    // Full: both refuse, from any count.
    expect(values(await second.accept([unit('c-09', { id: 'cap-1' }, { cap })]))).toEqual(['cap']);
    expect(values(await first.accept([unit('c-10', { id: 'cap-1' }, { cap })]))).toEqual(['cap']);
  });

  it('shows a send accepted a moment ago to GET /logs/{trackingId} and to a log query run at once, with no worker and no wait', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/send', headers: t.auth, payload: { type: 'seen_at_once', to: { id: 'now-user' }, inapp: { title: 'now' } } });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json();
    const [log] = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs;
    expect(log).toMatchObject({ trackingId, type: 'seen_at_once', user_id: 'now-user' });

    const started = await t.app.inject({ method: 'POST', url: '/logs/query', headers: t.auth, payload: { notificationFilter: ['seen_at_once'] } });
    const { queryId } = started.json();
    // The query's job, run here by hand: no worker has ingested or processed the send.
    await new LogsService(t.deps, t.deps.queue).runQuery(queryId);
    const result = (await t.app.inject({ method: 'GET', url: `/logs/query/${queryId}`, headers: t.auth })).json();
    expect(result.status).toBe('Complete');
    expect(result.logs.map((l: { trackingId: string }) => l.trackingId)).toEqual([trackingId]);
  });
});

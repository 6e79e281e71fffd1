// In-app content is delivered inside the message's processing transaction: no delivery job of
// its own, one recorded attempt, and the websocket push after commit.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('in-app delivered with the message (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true });
  });
  afterAll(() => t.close());

  const deliveryJobs = async (): Promise<number> => {
    if (kind === 'sqlite') {
      const { rows } = await sql<{ n: number }>`select count(*) as n from queue_jobs where name = 'delivery.run'`.execute(t.deps.db);
      return Number(rows[0].n);
    }
    const { rows: schema } = await sql<{ s: string }>`select current_schema() as s`.execute(t.deps.db);
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(`${schema[0].s}_boss.job`)} where name = 'delivery.run'`.execute(t.deps.db);
    return rows[0].n;
  };

  it('stores the notification, records one successful attempt, and queues no delivery job', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: t.auth,
      payload: { type: 'inline_inapp', to: { id: 'inline-user' }, parameters: { n: 3 }, inapp: { title: 'You have {{ n }} new' } },
    });
    expect(res.statusCode).toBe(200);
    const trackingId = res.json().trackingId as string;
    const log = await eventually(async () => {
      const l = (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0];
      return l?.inapp_delivered_at ? l : undefined;
    }, 10_000, 'in-app delivered');
    expect(log.inapp_sent_at).toBe(log.inapp_delivered_at);

    const { rows: stored } = await sql<{ title: string }>`select title from inapp_notifications where tracking_id = ${trackingId}`.execute(t.deps.db);
    expect(stored).toEqual([{ title: 'You have 3 new' }]);

    const { rows: attempts } = await sql<{ attempt: number; outcome: string }>`
      select a.attempt, a.outcome from delivery_attempts a join deliveries d on d.id = a.delivery_id
      where d.tracking_id = ${trackingId} and d.channel = 'inapp'`.execute(t.deps.db);
    expect(attempts.map((a) => [Number(a.attempt), a.outcome])).toEqual([[1, 'success']]);
    expect(await deliveryJobs()).toBe(0);
  });
});

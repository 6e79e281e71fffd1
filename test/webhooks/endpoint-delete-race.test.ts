// Deleting an endpoint while a worker transaction holds one of its deliveries and then writes a
// row that references the endpoint (an attempt, a new delivery): on PostgreSQL the two wait for
// each other and one is aborted as a deadlock victim. The delete is run again then, so the owner
// gets 200 and the endpoint is gone with everything of it, never a 500.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.runIf(STORAGE_KINDS.includes('postgres'))('deleting an endpoint a worker holds (postgres)', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext('postgres');
  });
  afterAll(() => t?.close());

  it('answers 200 and leaves nothing of the endpoint when the worker wins the lock race', async () => {
    const created = await t.app.inject({ method: 'POST', url: '/webhooks', headers: t.auth, payload: { webhook: 'https://hooks.example.com/race', events: ['EMAIL_FAILED'] } });
    expect(created.statusCode).toBe(200);
    const endpointId = created.json<{ id: string }>().id;
    const now = new Date().toISOString();
    const insertDelivery = (db: typeof t.deps.db, id: string) =>
      sql`insert into webhook_deliveries (id, event_id, endpoint_id, account_id, env_id, event_type, status, attempts, round_attempts, next_attempt_at, created_at, updated_at)
        values (${id}, ${`event-${id}`}, ${endpointId}, ${t.account.accountId}, ${t.account.clientId}, 'EMAIL_FAILED', 'pending', 0, 0, ${now}, ${now}, ${now})`.execute(db);
    await insertDelivery(t.deps.db, 'race-d1');

    let deleting: Promise<{ statusCode: number; body: string }> | undefined;
    // The worker's side: holds the delivery's row, then (once the delete waits on it) inserts
    // another delivery of the endpoint, whose foreign key needs the endpoint's row.
    await t.deps.db.transaction().execute(async (trx) => {
      await sql`update webhook_deliveries set lease = 'worker' where id = 'race-d1'`.execute(trx);
      deleting = t.app.inject({ method: 'DELETE', url: `/webhooks/${endpointId}`, headers: t.auth });
      await eventually(
        async () => {
          const waiting = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query ilike '%webhook_%' and datname = current_database()`.execute(t.deps.db);
          return waiting.rows[0].n > 0;
        },
        10_000,
        'the delete to wait for the worker',
      );
      await insertDelivery(trx, 'race-d2');
    }).catch(() => {
      // Chosen as the deadlock victim instead: the worker's transaction is rolled back (its
      // delivery is claimed again later); the delete must still succeed.
    });
    const res = await deleting!;
    expect(res.statusCode, res.body).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: `/webhooks/${endpointId}`, headers: t.auth })).statusCode).toBe(404);
    const left = await sql<{ n: number }>`select count(*)::int as n from webhook_deliveries where endpoint_id = ${endpointId}`.execute(t.deps.db);
    expect(left.rows[0].n).toBe(0);
  });
});

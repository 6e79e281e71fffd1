// Migration 0077 rebuilds user_preferences with sub_notification_id in its key: rows written
// before it (the email unsubscribes of 0072) survive as type-level options, on both engines, and
// down() gives the old table back with them.
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PreferencesRepository } from '../../src/modules/preferences/preferences.repository.js';
import * as migration from '../../src/storage/migrations/0077_preference_sub_notifications.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('migration 0077 (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('keeps the rows written before it as type-level options, and down() keeps them too', async () => {
    const db = t.deps.db as unknown as Kysely<unknown>;
    await migration.down(db);
    const at = '2026-11-01T00:00:00.000Z';
    await sql`insert into user_preferences (env_id, user_id, notification_id, channel, account_id, delivery, source, created_at, updated_at)
      values (${t.account.clientId}, 'ada', 'newsletter', 'email', ${t.account.accountId}, 'off', 'unsubscribe', ${at}, ${at})`.execute(db);
    await migration.up(db);

    const rows = await new PreferencesRepository(t.deps.db).ofUser(t.account.accountId, t.account.clientId, 'ada');
    expect(rows).toEqual([
      { env_id: t.account.clientId, user_id: 'ada', notification_id: 'newsletter', sub_notification_id: '', channel: 'email', account_id: t.account.accountId, delivery: 'off', source: 'unsubscribe', created_at: at, updated_at: at },
    ]);
    // A sub-notification's option is a row of its own beside the type's.
    await new PreferencesRepository(t.deps.db).upsert([{ ...rows[0], sub_notification_id: 'weekly', delivery: 'instant', source: 'api' }]);
    expect(await new PreferencesRepository(t.deps.db).ofUser(t.account.accountId, t.account.clientId, 'ada')).toHaveLength(2);

    await migration.down(db);
    const old = await sql<{ notification_id: string; delivery: string }>`select notification_id, delivery from user_preferences`.execute(db);
    expect(old.rows).toEqual([{ notification_id: 'newsletter', delivery: 'off' }]);
    await migration.up(db);
  });
});

// Migration 0080 on both engines: down() and up() again leave a working sub_notifications table
// whose rows go with their type (foreign key, cascade).
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as migration from '../../src/storage/migrations/0080_sub_notifications_retention.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('migration 0080 (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('goes down and up again; a sub-notification goes with its type', async () => {
    const db = t.deps.db as unknown as Kysely<unknown>;
    await migration.down(db);
    await migration.up(db);
    await t.app.inject({ method: 'POST', url: '/types', headers: t.auth, payload: { notificationId: 'comments', title: 'c', channels: ['EMAIL'] } });
    expect((await t.app.inject({ method: 'PUT', url: '/notifications/comments/subNotifications/p1', headers: t.auth, payload: { title: 'P1' } })).statusCode).toBe(200);
    const count = async () => Number((await sql<{ n: number }>`select count(*) as n from sub_notifications`.execute(db)).rows[0].n);
    expect(await count()).toBe(1);
    await t.app.inject({ method: 'DELETE', url: '/types/comments', headers: t.auth });
    expect(await count()).toBe(0);
  });
});

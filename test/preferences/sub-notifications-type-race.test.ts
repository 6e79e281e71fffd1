// PUT .../subNotifications/{id} racing DELETE /types/{type}: the PUT answers 404 (the type went
// first) or 200 (the sub-notification went with the type afterwards), never the 500 of the
// foreign key to the type. The postgres-only test holds the type's deletion uncommitted until the
// PUT has read the type and waits, so the interleaving that failed is the one that runs.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { expectErrorBody } from '../helpers/error-body.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { LockHolder } from '../templates/pg-lock-holder.js';

/** The requests both suites make, on the context `current` answers when they run. */
function calls(current: () => TestContext) {
  const req = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown) =>
    current().app.inject({ method, url, headers: current().auth, ...(payload !== undefined ? { payload: payload as object } : {}) });
  const createType = async (id: string) => expect((await req('POST', '/types', { notificationId: id, title: id, channels: ['EMAIL'] })).statusCode).toBe(200);
  const listed = async () => (await req('GET', '/users/ada/preferences')).json<{ subNotifications: { notificationId: string }[] }>().subNotifications;
  return { req, createType, listed };
}

describe.each(STORAGE_KINDS)('a sub-notification written while its type is deleted (%s)', (kind) => {
  let t: TestContext;
  const { req, createType, listed } = calls(() => t);

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('sent together with the type deletion: 200 or 404, and nothing of the type is left', async () => {
    for (let round = 0; round < 15; round++) {
      const type = `race-${round}`;
      await createType(type);
      const [put, deleted] = await Promise.all([req('PUT', `/notifications/${type}/subNotifications/s1`, { title: 'S1' }), req('DELETE', `/types/${type}`)]);
      expect(deleted.statusCode, deleted.body).toBe(200);
      if (put.statusCode !== 200) expectErrorBody(put, 404, 'NOT_FOUND', new RegExp(`^Notification type "${type}" was not found`));
      expect((await listed()).filter((s) => s.notificationId === type), `round ${round}`).toEqual([]);
    }
  });
});

// Interleavings held with a PostgreSQL lock (SQLite runs one writer at a time: there is none to hold).
describe.runIf(STORAGE_KINDS.includes('postgres'))('a sub-notification written while its type is deleted, interleaved (postgres)', () => {
  let t: TestContext;
  let holder: LockHolder | undefined;
  const { req, createType, listed } = calls(() => t);

  beforeAll(async () => {
    t = await createTestContext('postgres');
  });
  afterEach(async () => {
    await holder?.close();
    holder = undefined;
  });
  afterAll(() => t.close());

  it('read the type while its deletion was uncommitted: 404 once the deletion commits', async () => {
    await createType('held');
    holder = await LockHolder.hold(t.storage, {
      text: 'delete from notification_types where env_id = $1 and notification_id = $2',
      values: [t.account.clientId, 'held'],
    });
    const put = req('PUT', '/notifications/held/subNotifications/s1', { title: 'S1' });
    await holder.waitForBlocked(1);
    await holder.release('commit');
    expectErrorBody(await put, 404, 'NOT_FOUND', /^Notification type "held" was not found/);
    expect(await listed()).toEqual([]);
  });

  it('written first: 200, and the deletion that follows takes the sub-notification with the type', async () => {
    await createType('kept');
    // The PUT holds the type until it commits; the deletion, held here too, goes after it.
    holder = await LockHolder.hold(t.storage, {
      text: 'select 1 from notification_types where env_id = $1 and notification_id = $2 for update',
      values: [t.account.clientId, 'kept'],
    });
    const put = req('PUT', '/notifications/kept/subNotifications/s1', { title: 'S1' });
    await holder.waitForBlocked(1);
    await holder.release();
    expect((await put).statusCode).toBe(200);
    expect(await listed()).toEqual([{ notificationId: 'kept', subNotificationId: 's1', title: 'S1' }]);
    expect((await req('DELETE', '/types/kept')).statusCode).toBe(200);
    expect(await listed()).toEqual([]);
  });
});

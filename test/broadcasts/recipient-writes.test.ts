// Writing many recipients' states at once (RecipientDeliveryRepository.setEach, what a sync of
// recipients writes), on both engines: each recipient gets its own values, recipients whose
// patches set different columns are written right in the same call, a recipient no longer in the
// state the sync read it in is left alone, and so is every recipient not named.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Updateable } from 'kysely';
import { createDraft } from '../helpers/broadcasts.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { type BroadcastRecipientsTable, type RecipientRow, broadcastsDb } from '../../src/modules/broadcasts/broadcasts.tables.js';
import { RecipientDeliveryRepository } from '../../src/modules/broadcasts/recipient-delivery.repository.js';

const N = 140;
const AT = (i: number) => new Date(Date.UTC(2026, 4, 4, 7, 0, i)).toISOString();
const NOW = '2026-05-04T08:00:00.000Z';

describe.each(STORAGE_KINDS)('writing the states of many broadcast recipients (%s)', (kind) => {
  let t: TestContext;
  const scope = () => ({ accountId: t.account.accountId, envId: t.account.clientId });
  const db = () => broadcastsDb(t.deps.db);

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('writes each recipient its own patch, only those still in the state read', async () => {
    const { broadcastId: id } = await createDraft(t);
    // Recipients 1..N pending, except every tenth already delivered (another sync got there first).
    const rows: RecipientRow[] = Array.from({ length: N }, (_, k) => {
      const seq = k + 1;
      const done = seq % 10 === 0;
      return {
        broadcast_id: id,
        seq,
        account_id: t.account.accountId,
        env_id: t.account.clientId,
        user_id: `u${seq}`,
        email: `u${seq}@example.com`,
        state: done ? 'delivered' : 'pending',
        skip_reason: null,
        tracking_id: `trk-${seq}`,
        sent_at: done ? AT(0) : null,
        delivered_at: done ? AT(0) : null,
        failed_at: null,
        bounced_at: null,
        opened_at: null,
        clicked_at: null,
        unsubscribed_at: null,
        due_at: null,
        updated_at: AT(0),
      };
    });
    await db().insertInto('broadcast_recipients').values(rows).execute();

    // Recipients 1..120 change: most delivered (each its own times, more than one statement's worth), some failed, some skipped.
    const patchOf = (seq: number): Updateable<BroadcastRecipientsTable> =>
      seq % 7 === 0
        ? { state: 'failed', failed_at: AT(seq), updated_at: NOW }
        : seq % 11 === 0
          ? { state: 'skipped', skip_reason: 'SUPPRESSED', updated_at: NOW }
          : { state: 'delivered', sent_at: AT(seq), delivered_at: AT(seq), opened_at: null, clicked_at: null, unsubscribed_at: null, updated_at: NOW };
    const changes = Array.from({ length: 120 }, (_, k) => ({ seq: k + 1, patch: patchOf(k + 1) }));
    await new RecipientDeliveryRepository(t.deps.db).setEach(scope(), id, 'pending', changes);

    const after = await db().selectFrom('broadcast_recipients').selectAll().where('broadcast_id', '=', id).orderBy('seq').execute();
    const expected = rows.map((row) => (row.state === 'pending' && row.seq <= 120 ? { ...row, ...patchOf(row.seq) } : row));
    expect(after).toEqual(expected);
    // What the expectation covers: every kind of change, and rows left alone.
    expect(new Set(after.map((r) => r.state))).toEqual(new Set(['delivered', 'failed', 'skipped', 'pending']));
    expect(after.find((r) => r.seq === 20)).toMatchObject({ state: 'delivered', sent_at: AT(0), updated_at: AT(0) });
    expect(after.find((r) => r.seq === 121)).toMatchObject({ state: 'pending', updated_at: AT(0) });
    expect(after.find((r) => r.seq === 118)).toMatchObject({ state: 'delivered', sent_at: AT(118), delivered_at: AT(118) });
  });
});

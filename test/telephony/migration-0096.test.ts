// Migration 0096 on both engines: down() and up() again leave a working sms_opt_outs table:
// one row per (account, environment, number), the first STOP kept, START removing it.
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SmsOptOuts } from '../../src/modules/telephony/sms-opt-outs.service.js';
import * as migration from '../../src/storage/migrations/0096_sms_opt_outs.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('migration 0096 (%s)', (kind) => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('goes down and up again; a number opts out once per environment', async () => {
    const db = t.deps.db as unknown as Kysely<unknown>;
    await migration.down(db);
    await migration.up(db);
    const optOuts = new SmsOptOuts(t.deps);
    const scope = { accountId: t.account.accountId, envId: t.account.clientId };
    const stop = { keyword: 'STOP', to: '+14155550100', messageSid: null, at: '2026-01-15T10:00:00.000Z' };
    await optOuts.stop(scope, '+14155556201', stop);
    await optOuts.stop(scope, '+14155556201', { ...stop, keyword: 'QUIT' });
    expect(await optOuts.optedOut(scope.accountId, scope.envId, ['+14155556201', '+14155556202'])).toEqual(new Set(['+14155556201']));
    expect(await optOuts.optedOut(scope.accountId, 'another-env', ['+14155556201'])).toEqual(new Set());
    const rows = await sql<{ keyword: string }>`select keyword from sms_opt_outs`.execute(db);
    expect(rows.rows).toEqual([{ keyword: 'STOP' }]);
    await optOuts.start(scope, '+14155556201');
    expect(await optOuts.optedOut(scope.accountId, scope.envId, ['+14155556201'])).toEqual(new Set());
  });
});

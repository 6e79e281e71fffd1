import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NumbersService } from '../../src/modules/telephony/numbers.service.js';
import { TelephonyRepository } from '../../src/modules/telephony/telephony.repository.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

/**
 * An account's first development number is allocated on first need, and one send's SMS and call
 * need it at the same moment. Before the unique default index, the two could each allocate one, or
 * the second could read the first's fresh number as "released" and fail with NO_SENDER_NUMBER
 * (seen as a CI failure of test/e2e/all-channels on PostgreSQL).
 */
describe.each(STORAGE_KINDS)('the first development number under concurrent need (%s)', (kind) => {
  let t: TestContext;

  beforeAll(async () => {
    t = await createTestContext(kind);
  });
  afterAll(() => t.close());

  it('gives every concurrent caller the same one number, and the account keeps only that one', async () => {
    for (let round = 0; round < 5; round++) {
      const account = await t.newAccount();
      const senders = await Promise.all(Array.from({ length: 8 }, () => t.services.numbers.defaultNumber(account.accountId)));
      expect(senders[0]).toMatch(/^\+1\d{3}55501\d{2}$/);
      expect(new Set(senders)).toEqual(new Set([senders[0]]));
      const listed = (await t.app.inject({ method: 'GET', url: '/numbers/list', headers: { authorization: `Bearer ${account.apiKey}` } })).json();
      expect(listed.numbers.map((n: { phoneNumber: string }) => n.phoneNumber)).toEqual([senders[0]]);
    }
  });

  it('orders a number while the automatic one lands between its read and its write, and keeps that one the default', async () => {
    const account = await t.newAccount();
    const automatic = '+14155550177';
    /** The account's automatic number is allocated right after the order has read that it has none. */
    class RacingRepository extends TelephonyRepository {
      private raced = false;
      override async listNumbers(accountId: string) {
        const rows = await super.listNumbers(accountId);
        if (!this.raced) {
          this.raced = true;
          const at = new Date().toISOString();
          await this.insertFirstDefaultNumber({ phone_number: automatic, account_id: accountId, label: null, source: 'dev', is_default: 1, created_at: at, released_at: null });
        }
        return rows;
      }
    }
    const numbers = new NumbersService(t.deps, new RacingRepository(t.deps.db));
    await expect(numbers.order(account.accountId, '+14155550960')).resolves.toMatchObject({ phoneNumber: '+14155550960' });
    const { rows } = await sql<{ phone_number: string; is_default: number }>`select phone_number, is_default from phone_numbers where account_id = ${account.accountId} order by phone_number`.execute(t.deps.db);
    expect(rows.map((r) => [r.phone_number, Number(r.is_default)])).toEqual([
      [automatic, 1],
      ['+14155550960', 0],
    ]);
  });

  it('orders a number beside the automatic one without a 500, and keeps one default', async () => {
    for (let round = 0; round < 5; round++) {
      const account = await t.newAccount();
      const ordered = `+1415555090${round}`;
      const [order, ...senders] = await Promise.all([
        t.app.inject({ method: 'POST', url: '/numbers/order', headers: { authorization: `Bearer ${account.apiKey}` }, payload: { phoneNumber: ordered } }),
        ...Array.from({ length: 4 }, () => t.services.numbers.defaultNumber(account.accountId)),
      ]);
      expect(order.statusCode, order.body).toBe(200);
      const { rows } = await sql<{ phone_number: string; is_default: number }>`select phone_number, is_default from phone_numbers where account_id = ${account.accountId} and released_at is null`.execute(t.deps.db);
      expect(rows.map((r) => r.phone_number)).toContain(ordered);
      const defaults = rows.filter((r) => Number(r.is_default) === 1).map((r) => r.phone_number);
      expect(defaults).toHaveLength(1);
      expect(new Set(senders)).toEqual(new Set([defaults[0]]));
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
});

import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';

/** Row type of migration 0096_sms_opt_outs. */
export interface SmsOptOutsTable {
  account_id: string;
  env_id: string;
  /** The E.164 number that texted STOP. */
  phone_number: string;
  keyword: string;
  /** Our number the STOP was texted to. */
  to_number: string;
  message_sid: string | null;
  created_at: string;
}

export type SmsOptOutRow = Selectable<SmsOptOutsTable>;

type Db = Kysely<CoreTables & { sms_opt_outs: SmsOptOutsTable }>;

export class SmsOptOutsRepository {
  private readonly db: Db;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<{ sms_opt_outs: SmsOptOutsTable }>();
  }

  /** Records the opt-out; one already there keeps its first STOP. */
  async insert(row: SmsOptOutRow): Promise<void> {
    await this.db
      .insertInto('sms_opt_outs')
      .values(row)
      .onConflict((oc) => oc.columns(['account_id', 'env_id', 'phone_number']).doNothing())
      .execute();
  }

  async delete(accountId: string, envId: string, phoneNumber: string): Promise<void> {
    await this.db.deleteFrom('sms_opt_outs').where('account_id', '=', accountId).where('env_id', '=', envId).where('phone_number', '=', phoneNumber).execute();
  }

  /** Which of `numbers` opted out in the environment. */
  async optedOut(accountId: string, envId: string, numbers: string[]): Promise<string[]> {
    if (numbers.length === 0) return [];
    const rows = await this.db
      .selectFrom('sms_opt_outs')
      .select('phone_number')
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('phone_number', 'in', numbers)
      .execute();
    return rows.map((r) => r.phone_number);
  }
}

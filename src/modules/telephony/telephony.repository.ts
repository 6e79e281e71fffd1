import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingTables } from '../sending/sending.tables.js';

/** Row types of migration 0060_telephony. Timestamps are ISO-8601 text. */
export interface PhoneNumbersTable {
  phone_number: string;
  account_id: string;
  label: string | null;
  /** dev: allocated by the local carrier; twilio: a number of the configured Twilio account. */
  source: 'dev' | 'twilio';
  is_default: number;
  created_at: string;
  /** Migration 0086: set when the account released the number (it no longer sends); null while active. */
  released_at: string | null;
}

export interface SmsSendsTable {
  delivery_id: string;
  account_id: string;
  env_id: string;
  tracking_id: string;
  user_id: string;
  to_number: string;
  from_number: string;
  provider_message_id: string;
  auto_reply: string | null;
  replied_at: string | null;
  /** The carrier's sid of the auto-reply. */
  reply_message_id: string | null;
  created_at: string;
}

export interface DevCarrierMessagesTable {
  sid: string;
  kind: 'sms' | 'call';
  direction: 'outbound' | 'inbound';
  account_id: string | null;
  env_id: string | null;
  from_number: string;
  to_number: string;
  body: string | null;
  media_urls: string;
  twiml: string | null;
  status: string;
  status_callback: string | null;
  segments: number;
  duration: number | null;
  price: string | null;
  error_code: number | null;
  created_at: string;
  updated_at: string;
}

export type TelephonyTables = {
  phone_numbers: PhoneNumbersTable;
  sms_sends: SmsSendsTable;
  dev_carrier_messages: DevCarrierMessagesTable;
};

export type PhoneNumberRow = Selectable<PhoneNumbersTable>;
export type SmsSendRow = Selectable<SmsSendsTable>;
/** The last send to a user from one of our numbers, with its notification type (null once the message is purged). */
export type LastSmsSend = SmsSendRow & { notification_id: string | null };
export type DevCarrierRow = Selectable<DevCarrierMessagesTable>;

type Db = Kysely<CoreTables & SendingTables & TelephonyTables>;

export class TelephonyRepository {
  private readonly db: Db;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<SendingTables & TelephonyTables>();
  }

  // --- numbers -------------------------------------------------------------------------------

  /** The account's active numbers (the ones it sends from). */
  listNumbers(accountId: string): Promise<PhoneNumberRow[]> {
    return this.db
      .selectFrom('phone_numbers')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('released_at', 'is', null)
      .orderBy('created_at')
      .orderBy('phone_number')
      .execute();
  }

  /** The account's numbers released at or after `since`, latest release first. */
  listReleasedNumbers(accountId: string, since: string): Promise<PhoneNumberRow[]> {
    return this.db
      .selectFrom('phone_numbers')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('released_at', '>=', since)
      .orderBy('released_at', 'desc')
      .orderBy('phone_number')
      .execute();
  }

  /** Whether the account ever had a number, released ones included. */
  async hasAnyNumber(accountId: string): Promise<boolean> {
    return (await this.db.selectFrom('phone_numbers').select('phone_number').where('account_id', '=', accountId).limit(1).executeTakeFirst()) !== undefined;
  }

  /** Which of `candidates` belong to an account (active or released). */
  async takenNumbers(candidates: string[]): Promise<Set<string>> {
    if (candidates.length === 0) return new Set();
    const rows = await this.db.selectFrom('phone_numbers').select('phone_number').where('phone_number', 'in', candidates).execute();
    return new Set(rows.map((r) => r.phone_number));
  }

  /** The number's row, active or released. */
  findNumber(phoneNumber: string): Promise<PhoneNumberRow | undefined> {
    return this.db.selectFrom('phone_numbers').selectAll().where('phone_number', '=', phoneNumber).executeTakeFirst();
  }

  /** The number's row while it is active (a number that sends). */
  findActiveNumber(phoneNumber: string): Promise<PhoneNumberRow | undefined> {
    return this.db.selectFrom('phone_numbers').selectAll().where('phone_number', '=', phoneNumber).where('released_at', 'is', null).executeTakeFirst();
  }

  /** Marks an active number of the account released; false when it has no such active number. */
  async releaseNumber(accountId: string, phoneNumber: string, at: string): Promise<boolean> {
    const res = await this.db
      .updateTable('phone_numbers')
      .set({ released_at: at, is_default: 0 })
      .where('account_id', '=', accountId)
      .where('phone_number', '=', phoneNumber)
      .where('released_at', 'is', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Makes a released number of the account active again, keeping its created_at. */
  async reactivateNumber(accountId: string, phoneNumber: string, isDefault: boolean): Promise<boolean> {
    const res = await this.db
      .updateTable('phone_numbers')
      .set({ released_at: null, is_default: isDefault ? 1 : 0 })
      .where('account_id', '=', accountId)
      .where('phone_number', '=', phoneNumber)
      .where('released_at', 'is not', null)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Gives a number released before `releasedBefore` (by any account) to `row`'s account; false when it is not such a number. */
  async takeOverReleasedNumber(row: PhoneNumberRow, releasedBefore: string): Promise<boolean> {
    const { phone_number: _number, ...fields } = row;
    const res = await this.db
      .updateTable('phone_numbers')
      .set(fields)
      .where('phone_number', '=', row.phone_number)
      .where('released_at', '<', releasedBefore)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  /** Inserts a number; false when it already belongs to someone (this account or another). */
  /**
   * Inserts the account's first default number unless another insert gave it one first (the
   * unique index phone_numbers_one_default) or took the number; false when nothing was inserted.
   */
  async insertFirstDefaultNumber(row: PhoneNumberRow): Promise<boolean> {
    const inserted = await this.db
      .insertInto('phone_numbers')
      .values(row)
      .onConflict((oc) => oc.doNothing())
      .returning('phone_number')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  async insertNumber(row: PhoneNumberRow): Promise<boolean> {
    const inserted = await this.db
      .insertInto('phone_numbers')
      .values(row)
      .onConflict((oc) => oc.column('phone_number').doNothing())
      .returning('phone_number')
      .executeTakeFirst();
    return inserted !== undefined;
  }

  // --- SMS sends (for inbound replies) ------------------------------------------------------

  async upsertSmsSend(row: SmsSendRow): Promise<void> {
    await this.db
      .insertInto('sms_sends')
      .values(row)
      .onConflict((oc) =>
        oc.column('delivery_id').doUpdateSet({ provider_message_id: row.provider_message_id, from_number: row.from_number, to_number: row.to_number, auto_reply: row.auto_reply }),
      )
      .execute();
  }

  /** The last send from `ourNumber` to `userNumber` (optionally within one account, or one of its environments). */
  lastSmsSend(userNumber: string, ourNumber: string, accountId?: string, envId?: string): Promise<LastSmsSend | undefined> {
    let q = this.db
      .selectFrom('sms_sends as s')
      // Left join: the send stays the last one even once its message is purged (retention).
      .leftJoin('messages as m', 'm.tracking_id', 's.tracking_id')
      .selectAll('s')
      .select('m.notification_id')
      .where('s.to_number', '=', userNumber)
      .where('s.from_number', '=', ourNumber);
    if (accountId) q = q.where('s.account_id', '=', accountId);
    if (envId) q = q.where('s.env_id', '=', envId);
    return q.orderBy('s.created_at', 'desc').orderBy('s.delivery_id', 'desc').limit(1).executeTakeFirst();
  }

  /** Claims the one auto-reply of a send; false when it was already claimed. */
  async claimAutoReply(deliveryId: string, at: string): Promise<boolean> {
    const res = await this.db.updateTable('sms_sends').set({ replied_at: at }).where('delivery_id', '=', deliveryId).where('replied_at', 'is', null).executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }

  async releaseAutoReply(deliveryId: string): Promise<void> {
    await this.db.updateTable('sms_sends').set({ replied_at: null }).where('delivery_id', '=', deliveryId).execute();
  }

  async setReplyMessageId(deliveryId: string, sid: string): Promise<void> {
    await this.db.updateTable('sms_sends').set({ reply_message_id: sid }).where('delivery_id', '=', deliveryId).execute();
  }

  /**
   * Users of one environment with this phone number, for STOP/START, in id order (the order
   * their rows are then locked in, as smsRecipients locks them).
   */
  usersWithNumber(accountId: string, envId: string, number: string): Promise<{ id: string }[]> {
    return this.db
      .selectFrom('users')
      .select('id')
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where('number', '=', number)
      .orderBy('id')
      .execute();
  }

  /**
   * The suppressions (JSON text) of a send's user and of every user of the environment with this
   * number, before an auto-reply to it. With `lock` (PostgreSQL) their rows are locked in id
   * order until the transaction ends, so a STOP being recorded for them commits first and is seen.
   */
  smsRecipients(accountId: string, envId: string, userId: string, number: string, lock: boolean): Promise<{ id: string; suppressions: string | null }[]> {
    let q = this.db
      .selectFrom('users')
      .select(['id', 'suppressions'])
      .where('account_id', '=', accountId)
      .where('env_id', '=', envId)
      .where((eb) => eb.or([eb('number', '=', number), eb('id', '=', userId)]))
      .orderBy('id');
    if (lock) q = q.forUpdate();
    return q.execute();
  }

  /** Of these provider ids of one channel (Twilio sids), those a delivery recorded already. */
  async recordedProviderIds(channel: 'sms' | 'call', sids: string[]): Promise<Set<string>> {
    if (sids.length === 0) return new Set();
    const rows = await this.db.selectFrom('deliveries').select('provider_message_id').where('channel', '=', channel).where('provider_message_id', 'in', sids).execute();
    return new Set(rows.map((r) => r.provider_message_id!));
  }

  // --- local development carrier -------------------------------------------------------------

  async insertCarrierMessage(row: DevCarrierRow): Promise<void> {
    await this.db.insertInto('dev_carrier_messages').values(row).execute();
  }

  findCarrierMessage(sid: string): Promise<DevCarrierRow | undefined> {
    return this.db.selectFrom('dev_carrier_messages').selectAll().where('sid', '=', sid).executeTakeFirst();
  }

  async updateCarrierMessage(sid: string, patch: Partial<DevCarrierRow>): Promise<void> {
    await this.db.updateTable('dev_carrier_messages').set(patch).where('sid', '=', sid).execute();
  }

  /**
   * The carrier's messages or calls from one number to another, newest first, as its
   * REST list (Messages.json / Calls.json with To and From) reads them: account-wide, like Twilio's.
   */
  listCarrierResources(kind: 'sms' | 'call', options: { to?: string; from?: string; limit: number }): Promise<DevCarrierRow[]> {
    let q = this.db.selectFrom('dev_carrier_messages').selectAll().where('kind', '=', kind);
    if (options.to) q = q.where('to_number', '=', options.to);
    if (options.from) q = q.where('from_number', '=', options.from);
    return q.orderBy('created_at', 'desc').orderBy('sid', 'desc').limit(options.limit).execute();
  }

  /**
   * What the carrier was given for one environment, newest first: inbound messages the developer
   * simulated there, and outbound ones whose delivery (or auto-reply) belongs to it, joined by
   * the carrier's sid.
   */
  listCarrierMessages(scope: { accountId: string; envId: string }, kind: 'sms' | 'call', options: { to?: string; limit: number }) {
    let q = this.db
      .selectFrom('dev_carrier_messages as m')
      .leftJoin('deliveries as d', (join) => join.onRef('d.provider_message_id', '=', 'm.sid').on('d.channel', '=', kind))
      .leftJoin('sms_sends as r', 'r.reply_message_id', 'm.sid')
      .selectAll('m')
      .select((eb) => eb.fn.coalesce('d.tracking_id', 'r.tracking_id').as('tracking_id'))
      .where('m.kind', '=', kind)
      .where((eb) =>
        eb.or([
          eb.and([eb('m.account_id', '=', scope.accountId), eb('m.env_id', '=', scope.envId)]),
          eb.and([eb('d.account_id', '=', scope.accountId), eb('d.env_id', '=', scope.envId)]),
          eb.and([eb('r.account_id', '=', scope.accountId), eb('r.env_id', '=', scope.envId)]),
        ]),
      );
    if (options.to) q = q.where('m.to_number', '=', options.to);
    return q.orderBy('m.created_at', 'desc').orderBy('m.sid', 'desc').limit(options.limit).execute();
  }
}

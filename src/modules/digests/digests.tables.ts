import type { Kysely, Selectable } from 'kysely';
import type { CoreTables } from '../../storage/schema.js';
import type { SendingTables } from '../sending/sending.tables.js';
import type { DigestOption } from '../types/delivery-options.js';

/** A digest of one user's messages of one type on one channel (migration 0078). */
export interface DigestsTable {
  id: string;
  account_id: string;
  env_id: string;
  user_id: string;
  notification_id: string;
  /** Log form of the channel (email, sms, ...). */
  channel: string;
  option: DigestOption;
  /** The IANA zone due_at was computed in (UTC when the user has none, or an unknown one). */
  timezone: string;
  /** open: collecting; sent: claimed, its message is tracking_id; empty: nothing left to send; failed: could not be made. */
  state: 'open' | 'sent' | 'empty' | 'failed';
  due_at: string;
  tracking_id: string | null;
  item_count: number;
  failed_code: string | null;
  created_at: string;
  sent_at: string | null;
}

/** A delivery collected into a digest (its status is `digested`). */
export interface DigestItemsTable {
  digest_id: string;
  delivery_id: string;
  tracking_id: string;
  account_id: string;
  env_id: string;
  created_at: string;
}

export type DigestTables = { digests: DigestsTable; digest_items: DigestItemsTable };
export type DigestsDb = Kysely<CoreTables & SendingTables & DigestTables>;
export type DigestRow = Selectable<DigestsTable>;

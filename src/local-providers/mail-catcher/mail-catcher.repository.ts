import type { Kysely, Selectable } from 'kysely';
import type { CaughtEmail } from '../../channels/email/mail-catcher.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';

/**
 * Row type of `outbox_messages` (migration 0030_email; the table keeps its name): the mail
 * catcher's record is its own (channels/email/mail-catcher.ts).
 */
export type MailCatcherTables = {
  outbox_messages: CaughtEmail;
};

export type CaughtEmailRow = Selectable<CaughtEmail>;
export type CaughtEmailSummaryRow = Omit<CaughtEmailRow, 'raw' | 'html' | 'text' | 'headers'>;

export type MailCatcherScope = EnvScope;

export interface CaughtEmailListQuery {
  to?: string;
  trackingId?: string;
  limit: number;
  /** Continue after this row (newest first). */
  after?: { createdAt: string; id: string };
}

const SUMMARY_COLUMNS = [
  'id',
  'account_id',
  'env_id',
  'tracking_id',
  'user_id',
  'message_id',
  'from_address',
  'from_name',
  'to_address',
  'to_address_lc',
  'to_name',
  'cc',
  'bcc',
  'reply_to',
  'subject',
  'preview_text',
  'attachments',
  'size',
  'created_at',
] as const;

/** Kysely only: what the mail catcher caught, every query scoped by account and environment. */
export class MailCatcherRepository {
  private readonly db: Kysely<CoreTables & MailCatcherTables>;
  constructor(db: Kysely<CoreTables>) {
    this.db = db.withTables<MailCatcherTables>();
  }

  /** Stores a message once per Message-ID; returns the id of the stored row (new or earlier). */
  async insertOnce(row: CaughtEmailRow): Promise<string> {
    await this.db
      .insertInto('outbox_messages')
      .values(row)
      .onConflict((oc) => oc.columns(['account_id', 'env_id', 'message_id']).doNothing())
      .execute();
    const stored = await this.db
      .selectFrom('outbox_messages')
      .select('id')
      .where('account_id', '=', row.account_id)
      .where('env_id', '=', row.env_id)
      .where('message_id', '=', row.message_id)
      .executeTakeFirstOrThrow();
    return stored.id;
  }

  list(scope: MailCatcherScope, query: CaughtEmailListQuery): Promise<CaughtEmailSummaryRow[]> {
    let q = this.db
      .selectFrom('outbox_messages')
      .select(SUMMARY_COLUMNS)
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId);
    if (query.to) q = q.where('to_address_lc', '=', query.to.toLowerCase());
    if (query.trackingId) q = q.where('tracking_id', '=', query.trackingId);
    if (query.after) {
      const { createdAt, id } = query.after;
      q = q.where((eb) => eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('id', '<', id)])]));
    }
    return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(query.limit).execute();
  }

  find(scope: MailCatcherScope, id: string): Promise<CaughtEmailRow | undefined> {
    return this.db
      .selectFrom('outbox_messages')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('id', '=', id)
      .executeTakeFirst();
  }
}

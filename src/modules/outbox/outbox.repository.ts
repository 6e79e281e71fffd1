import type { Kysely, Selectable } from 'kysely';
import type { CaughtEmail } from '../../channels/email/outbox.js';
import { type EnvScope, EnvSettingsRepository } from '../../storage/env-settings.js';
import type { CoreTables } from '../../storage/schema.js';

/** Row types of migration 0030_email: the mail catcher's record is its own (channels/email/outbox.ts). */
export type OutboxMessagesTable = CaughtEmail;

export interface EmailSettingsTable {
  env_id: string;
  account_id: string;
  smtp_url_enc: string;
  created_at: string;
  updated_at: string;
}

export type EmailTables = {
  outbox_messages: OutboxMessagesTable;
  email_settings: EmailSettingsTable;
};

export type OutboxRow = Selectable<OutboxMessagesTable>;
export type OutboxSummaryRow = Omit<OutboxRow, 'raw' | 'html' | 'text' | 'headers'>;
export type EmailSettingsRow = Selectable<EmailSettingsTable>;

export type OutboxScope = EnvScope;

export interface OutboxListQuery {
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

export class OutboxRepository {
  private readonly settings: EnvSettingsRepository<EmailSettingsRow>;
  private readonly db: Kysely<CoreTables & EmailTables>;
  constructor(db: Kysely<CoreTables> | Kysely<any>) {
    this.settings = new EnvSettingsRepository<EmailSettingsRow>(db, 'email_settings');
    this.db = (db as Kysely<CoreTables>).withTables<EmailTables>();
  }

  /** Stores a message once per Message-ID; returns the id of the stored row (new or earlier). */
  async insertOnce(row: OutboxRow): Promise<string> {
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

  list(scope: OutboxScope, query: OutboxListQuery): Promise<OutboxSummaryRow[]> {
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

  find(scope: OutboxScope, id: string): Promise<OutboxRow | undefined> {
    return this.db
      .selectFrom('outbox_messages')
      .selectAll()
      .where('account_id', '=', scope.accountId)
      .where('env_id', '=', scope.envId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  findSettings(scope: OutboxScope): Promise<EmailSettingsRow | undefined> {
    return this.settings.find(scope);
  }

  upsertSettings(row: EmailSettingsRow): Promise<void> {
    return this.settings.upsert(row);
  }

  deleteSettings(scope: OutboxScope): Promise<boolean> {
    return this.settings.delete(scope);
  }
}

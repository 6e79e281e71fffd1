import type { CaughtAttachmentMeta } from '../../channels/email/mail-catcher.js';
import { invalid, notFound } from '../../errors.js';
import { type CaughtEmailRow, type CaughtEmailSummaryRow, type MailCatcherRepository, type MailCatcherScope } from './mail-catcher.repository.js';

export const CAUGHT_NOTE =
  'Kept in the local outbox because no SMTP server is configured for this environment; it was not delivered to the recipient. ' +
  'Set SMTP_URL on the server or PUT /settings/email/smtp to send real mail.';

export interface CaughtEmailSummary {
  id: string;
  trackingId: string;
  userId?: string;
  messageId: string;
  from: { name?: string; address: string };
  to: { name?: string; address: string };
  cc: string[];
  bcc: string[];
  replyTo: string[];
  subject: string;
  previewText?: string;
  attachments: CaughtAttachmentMeta[];
  size: number;
  createdAt: string;
  deliveredExternally: false;
  note: string;
}

export interface CaughtEmailDetail extends CaughtEmailSummary {
  html: string;
  text: string;
  headers: Record<string, string>;
  rawUrl: string;
  raw?: string;
}

const encodeCursor = (row: { created_at: string; id: string }) => Buffer.from(JSON.stringify([row.created_at, row.id])).toString('base64url');

function decodeCursor(cursor: string): { createdAt: string; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    if (typeof createdAt === 'string' && typeof id === 'string') return { createdAt, id };
  } catch {
    // fall through
  }
  throw invalid('The cursor is not one this server issued.', 'Pass the nextCursor of the previous page unchanged.');
}

/** What the mail catcher caught (GET /outbox): mail kept because no SMTP server is configured. */
export class MailCatcherService {
  constructor(private readonly repo: MailCatcherRepository) {}

  private summary(row: CaughtEmailSummaryRow): CaughtEmailSummary {
    return {
      id: row.id,
      trackingId: row.tracking_id,
      ...(row.user_id ? { userId: row.user_id } : {}),
      messageId: row.message_id,
      from: { ...(row.from_name ? { name: row.from_name } : {}), address: row.from_address },
      to: { ...(row.to_name ? { name: row.to_name } : {}), address: row.to_address },
      cc: JSON.parse(row.cc) as string[],
      bcc: JSON.parse(row.bcc) as string[],
      replyTo: JSON.parse(row.reply_to) as string[],
      subject: row.subject,
      ...(row.preview_text ? { previewText: row.preview_text } : {}),
      attachments: JSON.parse(row.attachments) as CaughtAttachmentMeta[],
      size: row.size,
      createdAt: row.created_at,
      deliveredExternally: false,
      note: CAUGHT_NOTE,
    };
  }

  async list(
    scope: MailCatcherScope,
    query: { to?: string; trackingId?: string; limit?: number; cursor?: string },
  ): Promise<{ messages: CaughtEmailSummary[]; nextCursor?: string }> {
    const limit = query.limit ?? 20;
    const rows = await this.repo.list(scope, {
      to: query.to,
      trackingId: query.trackingId,
      limit: limit + 1,
      ...(query.cursor ? { after: decodeCursor(query.cursor) } : {}),
    });
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return { messages: page.map((r) => this.summary(r)), ...(rows.length > limit && last ? { nextCursor: encodeCursor(last) } : {}) };
  }

  private async row(scope: MailCatcherScope, id: string): Promise<CaughtEmailRow> {
    const row = await this.repo.find(scope, id);
    if (!row) throw notFound('Outbox message', id, 'List the outbox with GET /outbox.');
    return row;
  }

  async get(scope: MailCatcherScope, id: string, includeRaw = false): Promise<CaughtEmailDetail> {
    const row = await this.row(scope, id);
    return {
      ...this.summary(row),
      html: row.html,
      text: row.text,
      headers: JSON.parse(row.headers) as Record<string, string>,
      rawUrl: `/outbox/${row.id}/raw`,
      ...(includeRaw ? { raw: row.raw } : {}),
    };
  }

  async raw(scope: MailCatcherScope, id: string): Promise<string> {
    return (await this.row(scope, id)).raw;
  }
}

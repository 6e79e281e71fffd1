import type { OutboxAttachmentMeta } from '../../channels/email/outbox.js';
import { SmtpEmailProvider, maskSmtpUrl, parseSmtpUrl } from '../../channels/email/smtp.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid, notFound } from '../../errors.js';
import { SafeFetchError, resolvePublicAddress } from '../../net/ssrf.js';
import { type OutboxRow, type OutboxScope, type OutboxSummaryRow, OutboxRepository } from './outbox.repository.js';

export const OUTBOX_NOTE =
  'Kept in the local outbox because no SMTP server is configured for this environment; it was not delivered to the recipient. ' +
  'Set SMTP_URL on the server or PUT /settings/email/smtp to send real mail.';

export interface OutboxMessageSummary {
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
  attachments: OutboxAttachmentMeta[];
  size: number;
  createdAt: string;
  deliveredExternally: false;
  note: string;
}

export interface OutboxMessageDetail extends OutboxMessageSummary {
  html: string;
  text: string;
  headers: Record<string, string>;
  rawUrl: string;
  raw?: string;
}

export interface SmtpSettingView {
  /** The environment's SMTP URL with its password masked; null when the environment has none. */
  url: string | null;
  /** What this environment's mail goes through now. */
  provider: 'smtp' | 'outbox';
  source: 'environment' | 'server' | 'default';
  updatedAt?: string;
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

export class OutboxService {
  private readonly repo: OutboxRepository;
  constructor(private readonly deps: Deps) {
    this.repo = new OutboxRepository(deps.db);
  }

  private summary(row: OutboxSummaryRow): OutboxMessageSummary {
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
      attachments: JSON.parse(row.attachments) as OutboxAttachmentMeta[],
      size: row.size,
      createdAt: row.created_at,
      deliveredExternally: false,
      note: OUTBOX_NOTE,
    };
  }

  async list(
    scope: OutboxScope,
    query: { to?: string; trackingId?: string; limit?: number; cursor?: string },
  ): Promise<{ messages: OutboxMessageSummary[]; nextCursor?: string }> {
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

  private async row(scope: OutboxScope, id: string): Promise<OutboxRow> {
    const row = await this.repo.find(scope, id);
    if (!row) throw notFound('Outbox message', id, 'List the outbox with GET /outbox.');
    return row;
  }

  async get(scope: OutboxScope, id: string, includeRaw = false): Promise<OutboxMessageDetail> {
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

  async raw(scope: OutboxScope, id: string): Promise<string> {
    return (await this.row(scope, id)).raw;
  }

  async getSmtpSetting(scope: OutboxScope): Promise<SmtpSettingView> {
    const row = await this.repo.findSettings(scope);
    if (row) {
      return { url: maskSmtpUrl(this.deps.secrets.decrypt(row.smtp_url_enc)), provider: 'smtp', source: 'environment', updatedAt: row.updated_at };
    }
    return this.deps.config.smtpUrl ? { url: null, provider: 'smtp', source: 'server' } : { url: null, provider: 'outbox', source: 'default' };
  }

  /** Stores the environment's SMTP server (encrypted). With `verify`, connects and authenticates first. */
  async putSmtpSetting(scope: OutboxScope, url: string, verify = false): Promise<SmtpSettingView> {
    const endpoint = parseSmtpUrl(url);
    try {
      await resolvePublicAddress(endpoint.host, { allowPrivateNetworks: this.deps.config.allowPrivateNetworks });
    } catch (err) {
      if (!(err instanceof SafeFetchError)) throw err;
      throw invalid(`The SMTP host is not usable: ${err.message}`, 'Use a public mail server host name.');
    }
    if (verify) await this.verify(url);
    const now = this.deps.clock.now().toISOString();
    await this.repo.upsertSettings({
      env_id: scope.envId,
      account_id: scope.accountId,
      smtp_url_enc: this.deps.secrets.encrypt(url),
      created_at: now,
      updated_at: now,
    });
    return this.getSmtpSetting(scope);
  }

  private async verify(url: string): Promise<void> {
    const probe = new SmtpEmailProvider({
      url,
      guard: { allowPrivateNetworks: this.deps.config.allowPrivateNetworks },
      connectionTimeoutMs: 10_000,
      greetingTimeoutMs: 10_000,
      socketTimeoutMs: 10_000,
    });
    try {
      await probe.verify();
    } catch (err) {
      const e = err as { response?: string; message?: string };
      throw new AppError('PROVIDER_ERROR', `The SMTP server check failed: ${(e.response ?? e.message ?? String(err)).slice(0, 300)}`, 'Check host, port and credentials; the setting was not saved.');
    } finally {
      await probe.close();
    }
  }

  async deleteSmtpSetting(scope: OutboxScope): Promise<void> {
    if (!(await this.repo.deleteSettings(scope))) {
      throw new AppError('NOT_FOUND', 'This environment has no SMTP setting.', 'GET /settings/email/smtp shows what mail goes through.');
    }
  }
}

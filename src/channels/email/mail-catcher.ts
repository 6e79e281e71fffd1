import type { Deps } from '../../deps.js';
import type { DeliveryResult, EmailMessage, EmailProvider } from '../types.js';
import { composeEmail } from './compose.js';
import { PlainTextCache } from './plain-text.js';
import { DkimSigner } from './dkim.js';
import { buildMime } from './mime-builder.js';

/** What the mail catcher records per attachment (the bytes themselves are in the raw MIME). */
export interface CaughtAttachmentMeta {
  filename: string;
  contentType?: string;
  size: number;
  source: 'url' | 'inline';
  url?: string;
}

/** The header block of a MIME message as lower-case name -> unfolded value (repeated names joined by ", "). */
export function parseHeaderBlock(raw: string): Record<string, string> {
  const end = raw.search(/\r?\n\r?\n/);
  const block = (end < 0 ? raw : raw.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  const headers: Record<string, string> = {};
  for (const line of block.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] ? `${headers[name]}, ${value}` : value;
  }
  return headers;
}

/** An email the mail catcher keeps: a row of `outbox_messages` (migration 0030_email). JSON columns are text. */
export interface CaughtEmail {
  id: string;
  account_id: string;
  env_id: string;
  tracking_id: string;
  user_id: string | null;
  message_id: string;
  from_address: string;
  from_name: string | null;
  to_address: string;
  to_address_lc: string;
  to_name: string | null;
  cc: string;
  bcc: string;
  reply_to: string;
  subject: string;
  preview_text: string | null;
  html: string;
  text: string;
  headers: string;
  attachments: string;
  raw: string;
  size: number;
  created_at: string;
}

/** Where the mail catcher keeps what it catches (src/local-providers/mail-catcher's repository is it). */
export interface MailCatcherStore {
  /** Stores the email once per (tracking id, recipient); answers the stored row's id. */
  insertOnce(row: CaughtEmail): Promise<string>;
}

/**
 * The embedded default when no SMTP server is configured: builds exactly the MIME message SMTP
 * would carry (same composer), and keeps it in `outbox_messages` for the account and environment
 * instead of sending it. Nothing leaves the machine.
 */
export class MailCatcherEmailProvider implements EmailProvider {
  /** The name the API shows for it (GET /settings/email/smtp "provider", GET /outbox). */
  readonly name = 'outbox';
  private readonly plainText = new PlainTextCache();
  private readonly signer = new DkimSigner();

  constructor(
    private readonly deps: Pick<Deps, 'ids' | 'clock'>,
    private readonly repo: MailCatcherStore,
    private readonly options: { allowPrivateNetworks?: boolean } = {},
  ) {}

  async send(message: EmailMessage): Promise<DeliveryResult> {
    const composed = await composeEmail(message, { allowPrivateNetworks: this.options.allowPrivateNetworks }, this.plainText);
    // What SMTP would carry, signed the same way (no Bcc header; the stream transport keeps it).
    const raw = (await buildMime(composed.options, message.dkim, this.signer)).raw.toString('utf8');
    const attachments: CaughtAttachmentMeta[] = composed.attachments.map((a) => ({
      filename: a.filename,
      ...(a.contentType ? { contentType: a.contentType } : {}),
      size: a.content.length,
      source: a.source,
      ...(a.url ? { url: a.url } : {}),
    }));
    const id = await this.repo.insertOnce({
      id: this.deps.ids.uuid(),
      account_id: message.meta.accountId,
      env_id: message.meta.envId,
      tracking_id: message.meta.trackingId,
      user_id: message.meta.userId ?? null,
      message_id: composed.messageId,
      from_address: message.from.address,
      from_name: message.from.name ?? null,
      to_address: message.to.address,
      to_address_lc: message.to.address.toLowerCase(),
      to_name: message.to.name ?? null,
      cc: JSON.stringify(message.cc ?? []),
      bcc: JSON.stringify(message.bcc ?? []),
      reply_to: JSON.stringify(message.replyTo ?? []),
      subject: message.subject,
      preview_text: message.previewText ?? null,
      html: composed.html,
      text: composed.text,
      headers: JSON.stringify(parseHeaderBlock(raw)),
      attachments: JSON.stringify(attachments),
      raw,
      size: Buffer.byteLength(raw),
      created_at: this.deps.clock.now().toISOString(),
    });
    return {
      providerMessageId: composed.messageId,
      response: `stored in the local outbox as ${id} (not sent: no SMTP server is configured)`,
      accepted: [message.to.address, ...(message.cc ?? []), ...(message.bcc ?? [])],
    };
  }

  async close(): Promise<void> {}
}

import { PassThrough } from 'node:stream';
import type { AddressObject, ParsedMail } from 'mailparser';
import type { Deps } from '../../deps.js';
import { invalid } from '../../errors.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { DomainsService } from '../domains/domains.service.js';
import type { EngagementClient, EngagementService } from '../engagement/engagement.service.js';
import type { UnsubscribeToken } from '../engagement/tokens.js';
import type { NewWebhookEvent, WebhookOutbox } from '../webhooks/outbox.js';
import { AddressesRepository, type RepliedDelivery } from './addresses.repository.js';
import type { EmailAddressRow, InboundEmailRow } from './addresses.tables.js';
import { storableText } from '../../characters.js';
import { boundedHtmlToText } from '../../channels/email/plain-text.js';
import { MIME_LIMITS, type MimeLimits, messageIds, overMimeLimits } from './inbound-mime.js';

/** Text and HTML bodies are kept up to this many characters each in the log fields, the inbound record and the event. */
export const INBOUND_BODY_MAX_CHARS = 256 * 1024;

/** What a message may hold (inbound-mime.ts) and how long mailparser may take to read it. */
export interface InboundParseLimits extends MimeLimits {
  /**
   * A parse still running by then is given up and the message refused: what the limits cannot
   * see (a boundary declared in a form they do not read) may still stall mailparser for good.
   */
  parseDeadlineMs: number;
}

/** A 10 MB message parses in about half a second. */
export const INBOUND_PARSE_LIMITS: InboundParseLimits = { ...MIME_LIMITS, parseDeadlineMs: 30_000 };

/** Why a message is refused; `code` is the SMTP reply code. */
export class InboundRefusal extends Error {
  constructor(
    readonly responseCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** The SDK's fields of an attachment the log keeps (never its content). */
export interface AttachmentMeta {
  filename: string | null;
  contentType: string;
  size: number;
}

/**
 * A recipient the inbound SMTP server accepts: an inbound address of an account, or a
 * List-Unsubscribe mailto address (`unsubscribe+<token>@CLARION_INBOUND_DOMAIN`) of a sent email.
 */
export type InboundRecipient = { kind: 'address'; row: EmailAddressRow } | { kind: 'unsubscribe'; address: string; target: UnsubscribeToken };

/** What the inbound server needs of email engagement: the mailto unsubscribe. */
export type MailUnsubscribes = Pick<EngagementService, 'mailUnsubscribeTarget' | 'unsubscribeByMail'>;

/** One inbound message as the API lists it. */
export interface InboundEmailView {
  id: string;
  address: string;
  trackingId?: string;
  receivedAt: string;
  fields: Record<string, unknown>;
}

const addressesOf = (value: AddressObject | AddressObject[] | undefined) => (value ? (Array.isArray(value) ? value : [value]) : []).flatMap((a) => a.value);
const joined = (value: AddressObject | AddressObject[] | undefined) => addressesOf(value).map((a) => a.address).filter(Boolean).join(', ') || undefined;
/**
 * A reply is linked through at most this many of the ids it names, the most specific first: a
 * thread's References rarely hold more than a few dozen, and the database takes no more than some
 * tens of thousands of values in one query (SQLite 32,766, PostgreSQL 65,535), which a header
 * section of 512 KiB could otherwise pass.
 */
const MAX_LINK_IDS = 100;

/** A msg-id without its angle brackets, as the delivery's provider_message_id holds it. */
const bare = (id: string) => id.slice(1, -1);
const cap = (text: string | undefined) => (text === undefined ? undefined : text.length > INBOUND_BODY_MAX_CHARS ? text.slice(0, INBOUND_BODY_MAX_CHARS) : text);

/**
 * Mail received by the inbound SMTP server (inbound-smtp.ts): parsed with mailparser, linked to
 * the outbound email it replies to (an id of its In-Reply-To, else the latest of its References,
 * matched against the Message-ID Clarion gave the delivery: `<deliveryId@clarion>`, stored as the
 * delivery's provider_message_id), and recorded in one transaction: the `email_inbound_*` fields
 * merged into that delivery's log through the ledger, one `inbound_emails` row per receiving
 * address (replies and new mail alike), and EMAIL_INBOUND through the webhook outbox. Mail to a
 * List-Unsubscribe mailto address is not kept: it unsubscribes (EngagementService, the same path
 * as the one-click POST).
 */
export class InboundMailService {
  constructor(
    private readonly deps: Pick<Deps, 'db' | 'clock' | 'ids' | 'ledger' | 'logger'>,
    private readonly repo: AddressesRepository,
    private readonly outbox: WebhookOutbox,
    private readonly unsubscribes: MailUnsubscribes,
    private readonly domains: Pick<DomainsService, 'isVerified'>,
  ) {}

  /** An environment's inbound mail, newest first; `cursor` is the previous page's nextCursor. */
  async list(scope: EnvScope, query: { cursor?: string; limit: number; trackingId?: string; address?: string }): Promise<{ emails: InboundEmailView[]; nextCursor?: string }> {
    let before: { received_at: string; id: string } | undefined;
    if (query.cursor) {
      const row = await this.repo.findInbound(scope, query.cursor);
      if (!row) throw invalid(`cursor "${query.cursor}" is not an inbound email of this environment.`, "Pass the previous answer's nextCursor.");
      before = { received_at: row.received_at, id: row.id };
    }
    const rows = await this.repo.listInbound(scope, { before, limit: query.limit + 1, trackingId: query.trackingId, address: query.address?.trim().toLowerCase() });
    const page = rows.slice(0, query.limit);
    return { emails: page.map(inboundView), ...(rows.length > query.limit ? { nextCursor: page[page.length - 1].id } : {}) };
  }

  async find(scope: EnvScope, id: string): Promise<InboundEmailView | undefined> {
    const row = await this.repo.findInbound(scope, id);
    return row ? inboundView(row) : undefined;
  }

  /** What a recipient names, or undefined (refused at RCPT). */
  async findRecipient(address: string): Promise<InboundRecipient | undefined> {
    const row = await this.repo.findAddress(address.trim().toLowerCase());
    // A custom address receives while its domain is verified: a domain that failed its checks
    // (records gone) or was deleted may now belong to someone else.
    if (row) return row.type === 'builtin' || (await this.domains.isVerified(row.account_id, row.domain)) ? { kind: 'address', row } : undefined;
    const target = await this.unsubscribes.mailUnsubscribeTarget(address);
    return target ? { kind: 'unsubscribe', address, target } : undefined;
  }

  /**
   * Parses a message and, for the recipients it was accepted for, records it (inbound addresses)
   * or unsubscribes (mailto addresses); throws InboundRefusal when it is malformed or over
   * `limits`. `client`: the sending server, as the unsubscribe records it. Returns the inbound
   * records made.
   */
  async receive(raw: Buffer, recipients: InboundRecipient[], client: EngagementClient = {}, limits: InboundParseLimits = INBOUND_PARSE_LIMITS): Promise<InboundEmailRow[]> {
    const over = overMimeLimits(raw, limits);
    if (over) throw new InboundRefusal(550, `5.6.0 Message over the parsing limits: ${over}`);
    const parsed = await parse(raw, limits.parseDeadlineMs);
    // mailparser reads nearly anything; what RFC 5322 cannot do without is a header section
    // with an originator (3.6: From is required). No headerLines at all: mailparser could not read
    // the header section (past mailsplit's limit, which overMimeLimits refuses before).
    if (!parsed.headerLines?.length) throw new InboundRefusal(550, '5.6.0 Malformed message: no header section (RFC 5322)');
    const from = addressesOf(parsed.from).find((a) => a.address);
    const messageId = parsed.messageId === undefined ? undefined : storableText(parsed.messageId);
    if (!from?.address) throw new InboundRefusal(550, '5.6.0 Malformed message: no From address (RFC 5322 3.6.2)');

    for (const r of recipients) if (r.kind === 'unsubscribe') await this.unsubscribes.unsubscribeByMail(r.target, client);
    const addresses = recipients.flatMap((r) => (r.kind === 'address' ? [r.row] : []));
    if (addresses.length === 0) return [];

    const now = this.deps.clock.now().toISOString();
    const inReplyTo = headerMessageIds(parsed, 'in-reply-to').map(storableText);
    const references = headerMessageIds(parsed, 'references').map(storableText);
    const attachments: AttachmentMeta[] = parsed.attachments.map((a) => ({ filename: a.filename ?? null, contentType: a.contentType, size: a.size }));
    const common: Record<string, unknown> = {
      email_inbound_at: now,
      email_inbound_from: from.address,
      ...(from.name ? { email_inbound_from_name: from.name } : {}),
      email_inbound_to: joined(parsed.to),
      email_inbound_cc: joined(parsed.cc),
      email_inbound_bcc: joined(parsed.bcc),
      email_inbound_reply_to: joined(parsed.replyTo),
      email_inbound_subject: parsed.subject,
      email_inbound_body_text: cap(bodyText(parsed)),
      email_inbound_body_html: cap(typeof parsed.html === 'string' ? parsed.html : undefined),
      email_inbound_has_attachments: attachments.length > 0,
      email_inbound_attachment_count: attachments.length,
      ...(attachments.length ? { email_inbound_attachments: attachments } : {}),
      email_inbound_message_id: messageId,
      email_inbound_in_reply_to: inReplyTo.length ? inReplyTo.join(' ') : undefined,
      email_inbound_references: references.length ? references.join(' ') : undefined,
    };
    for (const key of Object.keys(common)) {
      if (common[key] === undefined) delete common[key];
      else common[key] = storable(common[key]);
    }
    // The ids a reply names, most specific first: In-Reply-To, then References newest first.
    const named = [...new Set([...inReplyTo, ...references.slice().reverse()].map(bare))].slice(0, MAX_LINK_IDS);

    return this.deps.ledger.transaction(async (tx) => {
      const repo = AddressesRepository.over(tx.db);
      const rows: InboundEmailRow[] = [];
      const events: NewWebhookEvent[] = [];
      for (const address of addresses) {
        const scope = { accountId: address.account_id, envId: address.env_id };
        const candidates = await repo.repliedDeliveries(scope, named);
        const replied = pickReplied(candidates, named);
        const id = this.deps.ids.uuid();
        const fields: Record<string, unknown> = {
          email_inbound_id: id,
          ...common,
          email_inbound_inbox: address.full_address,
          email_inbound_resolution_type: replied ? (inReplyTo.some((id) => bare(id) === replied.provider_message_id) ? 'in_reply_to' : 'references') : 'none',
        };
        if (replied) await tx.mergeDeliveryDetails(replied.id, fields, now);
        const row: InboundEmailRow = {
          id,
          account_id: address.account_id,
          env_id: address.env_id,
          address: address.full_address,
          tracking_id: replied?.tracking_id ?? null,
          delivery_id: replied?.id ?? null,
          message_id: messageId ?? null,
          fields: JSON.stringify(fields),
          received_at: now,
        };
        await repo.insertInbound(row);
        rows.push(row);
        events.push({
          accountId: address.account_id,
          envId: address.env_id,
          type: 'EMAIL_INBOUND',
          payload: {
            channel: 'EMAIL',
            userId: replied?.user_id ?? '',
            notificationId: replied?.notification_id ?? '',
            trackingId: replied?.tracking_id ?? '',
            occurredAt: now,
            details: fields,
          },
        });
      }
      await this.outbox.emit(tx.db, events);
      return rows;
    });
  }
}

/**
 * mailparser, bounded by a deadline. Given a stream rather than a buffer, simpleParser destroys its
 * parser when that stream fails: the deadline fails it, so a parse that would never settle both
 * answers and lets go of what it holds.
 */
async function parse(raw: Buffer, deadlineMs: number): Promise<ParsedMail> {
  // Loaded at the first inbound mail: some 4 MB of heap a server that receives none never holds (docs/memory.md).
  const { simpleParser } = await import('mailparser');
  // Not destroyed at its end, so that it can still fail once mailparser has read all of it.
  const input = new PassThrough({ autoDestroy: false });
  let timedOut = false;
  const deadline = setTimeout(() => {
    timedOut = true;
    input.destroy(new Error('parse deadline'));
  }, deadlineMs);
  try {
    // skipHtmlToText: mailparser's text of an HTML part is html-to-text's, unbounded, on this
    // thread, which no deadline can interrupt (an 8.7 MB table held it 184 s); bodyText reads
    // that text in bounded time instead.
    const parsing = simpleParser(input, { skipHtmlToText: true, skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true });
    input.end(raw);
    return await parsing;
  } catch (err) {
    if (timedOut) throw new InboundRefusal(550, `5.6.0 Message over the parsing limits: not parsed within ${deadlineMs / 1000} s`);
    throw new InboundRefusal(550, `5.6.0 Malformed message: ${(err as Error).message}`);
  } finally {
    clearTimeout(deadline);
  }
}

/** html-to-text with its default options, as mailparser converted HTML, in bounded time (compose.ts). */
const htmlText = boundedHtmlToText({});

/**
 * The message's text: its text parts; when they hold none (an HTML-only message), its HTML read
 * as text (boundedHtmlToText: at most the text of the first PLAIN_TEXT_MAX_HTML characters, fewer
 * where converting them is estimated over PLAIN_TEXT_BUDGET_NS; such a text ends with a line
 * "..."). An HTML part beside a text part is not read (mailparser added its text to theirs).
 */
function bodyText(parsed: ParsedMail): string | undefined {
  if (typeof parsed.html !== 'string' || (parsed.text !== undefined && /\S/.test(parsed.text))) return parsed.text;
  try {
    return htmlText(parsed.html);
  } catch {
    // html-to-text throws on some HTML (<ol type="I" start="10000">): the message is kept without
    // a text, as mailparser kept it (with the text "Invalid HTML content"), not refused for a retry.
    return undefined;
  }
}

/**
 * The msg-ids of the message's In-Reply-To or References fields, read from the raw lines:
 * mailparser takes the whole value of In-Reply-To for one id, comments and all.
 */
function headerMessageIds(parsed: ParsedMail, key: 'in-reply-to' | 'references'): string[] {
  return parsed.headerLines.filter((h) => h.key === key).flatMap((h) => messageIds(h.line.slice(h.line.indexOf(':') + 1)));
}

/** The delivery of the most specific id a reply names (In-Reply-To first). */
function pickReplied(candidates: RepliedDelivery[], named: string[]): RepliedDelivery | undefined {
  for (const id of named) {
    const hit = candidates.find((c) => c.provider_message_id === id);
    if (hit) return hit;
  }
  return undefined;
}

export function inboundView(row: InboundEmailRow): InboundEmailView {
  return {
    id: row.id,
    address: row.address,
    ...(row.tracking_id ? { trackingId: row.tracking_id } : {}),
    receivedAt: row.received_at,
    fields: JSON.parse(row.fields) as Record<string, unknown>,
  };
}

/** A parsed field with every string in it storable (storableText): the mail's text is the sender's. */
function storable(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(storable);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, storable(v)]));
  return value;
}


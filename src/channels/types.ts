/**
 * The contract between the delivery engine and channel providers. A provider turns one rendered
 * message for one recipient into one provider call; it never touches the database or the queue.
 */

/** Why a delivery attempt did not succeed; the engine retries only when `retryable`. */
export class DeliveryError extends Error {
  constructor(
    /** Readable, stable code recorded as `<channel>_failed_code`, e.g. SMTP_REJECTED, TIMEOUT. */
    readonly code: string,
    message: string,
    readonly options: {
      retryable: boolean;
      /** Provider's own status or code, e.g. "550 5.1.1" or "UNREGISTERED". */
      providerCode?: string;
      /** Honour a provider's Retry-After. */
      retryAfterMs?: number;
      /** The address or token the failure is about (bounce, removed push token). */
      recipient?: string;
      /** True when the recipient address/token is permanently invalid (hard bounce, unregistered token). */
      recipientInvalid?: boolean;
    },
  ) {
    super(message);
  }
  get retryable(): boolean {
    return this.options.retryable;
  }
}

export interface DeliveryResult {
  /** Provider's id for what it accepted (SMTP Message-ID, Twilio SID, APNs id, ...). */
  providerMessageId?: string;
  /** Short provider response for the log, e.g. "250 2.0.0 OK queued". */
  response?: string;
  /** Recipients the provider accepted. */
  accepted?: string[];
  /** Recipients the provider refused while accepting the message for the others (e.g. one bad Cc). */
  rejected?: string[];
}

export interface EmailAddress {
  name?: string;
  address: string;
}

export type EmailAttachment =
  | { filename: string; url: string; contentType?: string }
  | { filename: string; content: string /* base64 */; contentType?: string };

export interface EmailMessage {
  from: EmailAddress;
  to: EmailAddress;
  replyTo?: string[];
  cc?: string[];
  bcc?: string[];
  subject: string;
  html: string;
  /** Hidden preheader placed first in the body. */
  previewText?: string;
  attachments?: EmailAttachment[];
  /** Stable Message-ID (without angle brackets), the same on every retry of one delivery. */
  messageId: string;
  headers?: Record<string, string>;
  /** Open and click tracking, applied to the HTML when the mail is composed (compose.ts). */
  tracking?: EmailTracking;
  /** Who the message is for, so a provider that stores (the local outbox) can scope it. */
  meta: { accountId: string; envId: string; trackingId: string; userId?: string };
  /** Sign the built message with this key (the From domain's, once verified). */
  dkim?: EmailDkimKey;
  /** The envelope sender (SMTP MAIL FROM, where bounces go); the From address when absent. */
  returnPath?: string;
}

/** A DKIM signing key (nodemailer's DKIM options): d=, s= and the private key (PEM). */
export interface EmailDkimKey {
  domainName: string;
  keySelector: string;
  privateKey: string;
}

/** What the sender asks composition to add: the open pixel and a rewriter of links. */
export interface EmailTracking {
  /** Appended to the HTML as a 1x1 image; absent: no open tracking. */
  pixelUrl?: string;
  /** The tracked URL for an http(s) link and its tags; absent: links are left as written. */
  link?: (url: string, tags: Record<string, string[]> | undefined) => string;
}

export interface EmailProvider {
  readonly name: string;
  send(message: EmailMessage): Promise<DeliveryResult>;
  close(): Promise<void>;
}

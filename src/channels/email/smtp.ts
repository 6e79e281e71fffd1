import { invalid } from '../../errors.js';
import { resolvePublicAddress } from '../../net/ssrf.js';
import { DeliveryError, type DeliveryResult, type EmailMessage, type EmailProvider } from '../types.js';
import { composeEmail } from './compose.js';
import { PlainTextCache } from './plain-text.js';
import { MimeBuilder } from './mime-builder.js';
import { SmtpPool, type SmtpSentInfo } from './smtp-pool.js';

/** Where and how to reach an SMTP server, read from `smtp[s]://user:pass@host:port?options`. */
export interface SmtpEndpoint {
  host: string;
  port: number;
  /** Implicit TLS (smtps://, usually port 465); otherwise STARTTLS when offered. */
  secure: boolean;
  user?: string;
  pass?: string;
  requireTLS?: boolean;
  ignoreTLS?: boolean;
  rejectUnauthorized?: boolean;
}

const QUERY_FLAGS = ['requireTLS', 'ignoreTLS', 'tls.rejectUnauthorized'] as const;

/** Parses an SMTP URL; throws 400 VALIDATION_FAILED with a readable reason. */
export function parseSmtpUrl(raw: string): SmtpEndpoint {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid('The SMTP URL is not a valid URL.', 'Use smtp://user:pass@host:587 or smtps://user:pass@host:465.');
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:') {
    throw invalid(`The SMTP URL must start with smtp:// or smtps://, not ${url.protocol}//.`);
  }
  if (!url.hostname) throw invalid('The SMTP URL has no host.');
  const secure = url.protocol === 'smtps:';
  const endpoint: SmtpEndpoint = {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    ...(url.username ? { user: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { pass: decodeURIComponent(url.password) } : {}),
  };
  for (const [key, value] of url.searchParams) {
    if (!(QUERY_FLAGS as readonly string[]).includes(key) || !/^(true|false)$/.test(value)) {
      throw invalid(`Unsupported SMTP URL option "${key}=${value}".`, `Supported: ${QUERY_FLAGS.map((f) => `${f}=true|false`).join(', ')}.`);
    }
    const flag = value === 'true';
    if (key === 'requireTLS') endpoint.requireTLS = flag;
    else if (key === 'ignoreTLS') endpoint.ignoreTLS = flag;
    else endpoint.rejectUnauthorized = flag;
  }
  return endpoint;
}

/** The URL with its password replaced, for showing back and for logs. */
export function maskSmtpUrl(raw: string): string {
  const url = new URL(raw);
  if (url.password) url.password = '****';
  return url.href;
}

export interface SmtpProviderOptions {
  url: string;
  /**
   * The URL came from a user (an environment setting): connect only to a public address, checked
   * once and pinned (DNS rebinding cannot move it). The server's own SMTP_URL is trusted.
   */
  guard?: { allowPrivateNetworks: boolean };
  /** Passed to attachment fetches (attachment URLs always go through the SSRF guard). */
  allowPrivateNetworks?: boolean;
  maxConnections?: number;
  connectionTimeoutMs?: number;
  greetingTimeoutMs?: number;
  socketTimeoutMs?: number;
  /** EHLO name; defaults to the host name. */
  clientName?: string;
  /** Where messages are built, shared by the providers of a process (one thread); the provider's own otherwise. */
  mime?: MimeBuilder;
}

/** Nodemailer error codes that mean "could not talk to the server", worth retrying. */
const CONNECTION_CODES = new Set(['ECONNECTION', 'ESOCKET', 'EDNS', 'ETLS', 'EPROTOCOL', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'EHOSTUNREACH']);

interface NodemailerError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  command?: string;
  rejected?: string[];
  rejectedErrors?: NodemailerError[];
  recipient?: string;
}

/** "550 5.1.1 <a@b>: user unknown" -> "550 5.1.1" */
export function smtpStatus(response: string | undefined, responseCode?: number): string | undefined {
  const match = /^(\d{3})(?:[ -](\d\.\d{1,3}\.\d{1,3}))?/.exec(response ?? '');
  if (match) return match[2] ? `${match[1]} ${match[2]}` : match[1];
  return responseCode ? String(responseCode) : undefined;
}

/** The server's answer to RCPT TO for one recipient: a 5xx is a bad address for good, anything else is worth retrying. */
function recipientRefused(recipient: string, code: number, response: string, afterwards = ''): DeliveryError {
  const providerCode = smtpStatus(response, code);
  if (code >= 500) {
    return new DeliveryError('SMTP_RECIPIENT_REJECTED', `The server rejected ${recipient}: ${response}${afterwards}`, {
      retryable: false,
      providerCode,
      recipient,
      recipientInvalid: true,
    });
  }
  return new DeliveryError('SMTP_RECIPIENT_DEFERRED', `The server deferred ${recipient}: ${response}${afterwards}`, { retryable: true, providerCode, recipient });
}

/**
 * The user's own address refused at RCPT TO while a cc or bcc was accepted: nodemailer sends the
 * message to the others and reports the refusal only in `rejected`. The delivery is the user's,
 * so it fails as when every recipient is refused: a 5xx bounces and suppresses the address; a 4xx
 * is retried, since greylisting answers a first attempt so and failing would lose the user's mail.
 * The copies went out all the same: the failure says how many, not who (the send's request names
 * them; the EMAIL_FAILED webhook carries the failure text and keeps a bcc blind). A retry sends the
 * whole message again (with PIPELINING, DATA is on its way before the refusal is read, and nothing
 * recorded between attempts says who has it), so the copies may arrive twice, with the same
 * Message-ID: at least once, as every delivery. `user`: the user's address as it went into the
 * envelope (nodemailer's normalised form; first, as To comes before Cc and Bcc).
 */
export function userRefused(info: Pick<SmtpSentInfo, 'accepted' | 'rejected' | 'rejectedErrors'>, user: string | undefined): DeliveryError | undefined {
  if (!user || !info.rejected?.includes(user)) return undefined;
  const own = info.rejectedErrors?.find((e) => e.recipient === user);
  const code = own?.responseCode ?? 0;
  const others = info.accepted?.length ?? 0;
  const afterwards = `; it accepted the message for ${others} other recipient${others === 1 ? '' : 's'} (cc/bcc)${code >= 500 ? '' : '; a retry sends it to them again'}`;
  return recipientRefused(user, code, (own?.response ?? 'refused at RCPT TO').slice(0, 500), afterwards);
}

/** Turns what nodemailer threw into the engine's DeliveryError (retryable or not, whose fault). */
export function classifySmtpError(error: unknown, message: Pick<EmailMessage, 'to'>): DeliveryError {
  if (error instanceof DeliveryError) return error;
  const err = error as NodemailerError;
  const text = (err.response ?? err.message ?? String(error)).slice(0, 500);

  if (err.code === 'EENVELOPE' && err.command === 'RCPT TO') {
    // All recipients rejected. Report the primary recipient's own answer when it is among them.
    const own = err.rejectedErrors?.find((e) => e.recipient?.toLowerCase() === message.to.address.toLowerCase()) ?? err.rejectedErrors?.[0] ?? err;
    return recipientRefused(own.recipient ?? message.to.address, own.responseCode ?? err.responseCode ?? 0, own.response ?? text);
  }
  if (err.code === 'EENVELOPE' && !err.responseCode) {
    // Rejected by nodemailer itself before talking to the server: a malformed address.
    return new DeliveryError('SMTP_INVALID_ADDRESS', err.message, { retryable: false, recipient: message.to.address, recipientInvalid: true });
  }
  if (err.code === 'EAUTH') {
    // The server's credentials, not this message, are wrong: worth retrying once they are fixed.
    return new DeliveryError('SMTP_AUTH_FAILED', `SMTP authentication failed: ${text}`, { retryable: true, providerCode: smtpStatus(err.response, err.responseCode) });
  }
  if (err.responseCode) {
    const providerCode = smtpStatus(err.response, err.responseCode);
    if (err.responseCode >= 500) return new DeliveryError('SMTP_REJECTED', `The SMTP server rejected the message: ${text}`, { retryable: false, providerCode });
    return new DeliveryError('SMTP_TEMPORARY_FAILURE', `The SMTP server deferred the message: ${text}`, { retryable: true, providerCode });
  }
  if (err.code === 'ETIMEDOUT' || /timeout/i.test(err.message ?? '')) {
    return new DeliveryError('TIMEOUT', `SMTP timed out: ${text}`, { retryable: true, providerCode: err.code });
  }
  if (err.code && CONNECTION_CODES.has(err.code)) {
    return new DeliveryError('SMTP_CONNECTION_FAILED', `Could not talk to the SMTP server: ${text}`, { retryable: true, providerCode: err.code });
  }
  return new DeliveryError('SMTP_ERROR', `SMTP delivery failed: ${text}`, { retryable: true, ...(err.code ? { providerCode: err.code } : {}) });
}

/**
 * Sends over one pool of SMTP connections (SmtpPool), shared by every send through this
 * provider. Each message is built to one buffer by nodemailer's MailComposer, the composer its
 * pooled transport used (the same MIME message, the same envelope), on a thread of its own
 * (MimeBuilder).
 */
export class SmtpEmailProvider implements EmailProvider {
  readonly name = 'smtp';
  readonly endpoint: SmtpEndpoint;
  private pool?: Promise<SmtpPool>;
  private closed = false;
  /** Text alternatives of recently sent HTML (a broadcast repeats it). */
  private readonly plainText = new PlainTextCache();
  private readonly mime: MimeBuilder;
  /** The builder is this provider's own, closed with it. */
  private readonly ownMime: boolean;

  constructor(private readonly options: SmtpProviderOptions) {
    this.endpoint = parseSmtpUrl(options.url);
    this.ownMime = !options.mime;
    this.mime = options.mime ?? new MimeBuilder();
  }

  private async createPool(): Promise<SmtpPool> {
    const e = this.endpoint;
    let host = e.host;
    let servername: string | undefined;
    if (this.options.guard) {
      const pinned = await resolvePublicAddress(e.host, { allowPrivateNetworks: this.options.guard.allowPrivateNetworks });
      host = pinned.address;
      // TLS still checks the certificate against the name the user gave.
      if (pinned.address !== e.host) servername = e.host;
    }
    return new SmtpPool({
      connection: {
        host,
        port: e.port,
        secure: e.secure,
        ...(servername ? { servername } : {}),
        ...(e.requireTLS !== undefined ? { requireTLS: e.requireTLS } : {}),
        ...(e.ignoreTLS !== undefined ? { ignoreTLS: e.ignoreTLS } : {}),
        ...(e.rejectUnauthorized !== undefined ? { tls: { rejectUnauthorized: e.rejectUnauthorized } } : {}),
        connectionTimeout: this.options.connectionTimeoutMs ?? 15_000,
        greetingTimeout: this.options.greetingTimeoutMs ?? 15_000,
        socketTimeout: this.options.socketTimeoutMs ?? 60_000,
        ...(this.options.clientName ? { name: this.options.clientName } : {}),
      },
      ...(e.user !== undefined ? { auth: { user: e.user, pass: e.pass ?? '' } } : {}),
      maxConnections: this.options.maxConnections ?? 5,
      maxMessages: 100,
    });
  }

  private getPool(): Promise<SmtpPool> {
    if (this.closed) throw new DeliveryError('SMTP_ERROR', 'This SMTP provider is closed.', { retryable: true });
    if (!this.pool) {
      this.pool = this.createPool();
      // A failed guard check must not stay cached forever (DNS may be fixed); try again next time.
      this.pool.catch(() => {
        this.pool = undefined;
      });
    }
    return this.pool;
  }

  async send(message: EmailMessage): Promise<DeliveryResult> {
    const composed = await composeEmail(message, { allowPrivateNetworks: this.options.allowPrivateNetworks }, this.plainText);
    let pool: SmtpPool;
    try {
      pool = await this.getPool();
    } catch (err) {
      if (err instanceof DeliveryError) throw err;
      const e = err as { code?: string; message?: string };
      // The guard refused the server, or its name does not resolve.
      const blocked = e.code === 'ADDRESS_BLOCKED';
      throw new DeliveryError(blocked ? 'SMTP_HOST_BLOCKED' : 'SMTP_CONNECTION_FAILED', e.message ?? String(err), {
        retryable: !blocked,
        ...(e.code ? { providerCode: e.code } : {}),
      });
    }
    try {
      const { envelope, raw } = await this.mime.build(composed.options, message.dkim);
      const info = await pool.send(envelope, raw);
      // Checked only when someone was refused: the common send pays one length test.
      const refused = info.rejected?.length ? userRefused(info, envelope.to[0]) : undefined;
      if (refused) throw refused;
      return {
        providerMessageId: composed.messageId,
        response: info.response,
        accepted: (info.accepted ?? []).map(String),
        ...(info.rejected?.length ? { rejected: info.rejected.map(String) } : {}),
      };
    } catch (err) {
      throw classifySmtpError(err, message);
    }
  }

  /** Opens a connection and authenticates, without sending (settings check). */
  async verify(): Promise<void> {
    const pool = await this.getPool();
    await pool.verify();
  }

  async close(): Promise<void> {
    this.closed = true;
    const pool = this.pool;
    this.pool = undefined;
    if (pool) (await pool.catch(() => undefined))?.close();
    if (this.ownMime) await this.mime.close();
  }
}

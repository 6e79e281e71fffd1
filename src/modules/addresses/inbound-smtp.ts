import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { SMTPServer } from 'smtp-server';
import { INBOUND_PARSE_LIMITS, type InboundMailService, type InboundParseLimits, type InboundRecipient, InboundRefusal } from './inbound.service.js';

export interface InboundSmtpOptions {
  /** 0: an ephemeral port (tests). */
  port: number;
  host: string;
  maxBytes: number;
  /** Name in the greeting. */
  hostname?: string;
  /** What a message may hold and how long its parse may take (INBOUND_PARSE_LIMITS by default; tests change them). */
  parseLimits?: InboundParseLimits;
  /** MAX_DATA_PHASE_MS by default. */
  maxDataPhaseMs?: number;
  /** MAX_SESSION_MS by default. */
  maxSessionMs?: number;
}

/** Recipients of one message: RCPT TO accepts at most this many (452 after). */
const MAX_RECIPIENTS = 50;
/** Connections at once; more are refused with 421. */
const MAX_CLIENTS = 200;
/**
 * How long a session may stay silent before it is closed with 421: RFC 5321 4.5.3.2.7 has a
 * server wait at least 5 minutes for the next command. smtp-server does not count the time the
 * session waits for Clarion (a lookup, the message being parsed and stored).
 */
const IDLE_TIMEOUT_MS = 5 * 60_000;
/**
 * How long a message may take from the 354 to its final dot, and a session from its greeting to
 * its end: a sender trickling a byte now and then is never idle, and would hold one of the
 * MAX_CLIENTS for ever. Past them the session gets 421 4.4.2 and is closed.
 */
const MAX_DATA_PHASE_MS = 10 * 60_000;
const MAX_SESSION_MS = 30 * 60_000;

const smtpError = (responseCode: number, message: string) => Object.assign(new Error(message), { responseCode });

/** smtp-server's connection, whose type it does not export (SMTPServer.connections holds them). */
type Connection = SMTPServer['connections'] extends Set<infer C> ? C : never;

/**
 * One session's clocks: MAX_SESSION_MS from the greeting, MAX_DATA_PHASE_MS from a 354. Past
 * either, the message being received is dropped and smtp-server closes the connection after the
 * 421. Not while a received message is stored: a 421 before its reply would have it sent again.
 */
class SessionLimits {
  private readonly sessionTimer: NodeJS.Timeout;
  private dataTimer: NodeJS.Timeout | undefined;
  private dropMessage: (() => void) | undefined;
  private storing = false;
  private deferred: string | undefined;

  constructor(
    private readonly connection: Connection,
    maxSessionMs: number,
  ) {
    this.sessionTimer = setTimeout(() => this.expire(`4.4.2 Session longer than ${maxSessionMs / 1000} s, closing connection`), maxSessionMs).unref();
  }

  dataStarted(maxDataPhaseMs: number, dropMessage: () => void): void {
    this.dropMessage = dropMessage;
    this.dataTimer = setTimeout(() => this.expire(`4.4.2 Message not received within ${maxDataPhaseMs / 1000} s, closing connection`), maxDataPhaseMs).unref();
  }

  dataEnded(): void {
    clearTimeout(this.dataTimer);
    this.dropMessage = undefined;
  }

  /** Runs `store` (the message and its reply); an expiry meanwhile waits for it. */
  async whileStoring(store: () => Promise<void>): Promise<void> {
    this.storing = true;
    try {
      await store();
    } finally {
      this.storing = false;
      if (this.deferred) this.expire(this.deferred);
    }
  }

  end(): void {
    clearTimeout(this.sessionTimer);
    this.dataEnded();
    this.deferred = undefined;
  }

  private expire(text: string): void {
    if (this.storing) {
      this.deferred = text;
      return;
    }
    this.dropMessage?.();
    this.end();
    // smtp-server closes the connection after a 421.
    this.connection.send(421, text, false);
  }
}

/**
 * The inbound SMTP server (package smtp-server): plain SMTP on CLARION_INBOUND_SMTP_PORT, as the
 * last hop after an MX or a relay. RCPT TO is answered from the account addresses and the
 * List-Unsubscribe mailto addresses of sent mail (550 for any other, a tampered token included); SIZE is advertised and a larger message is refused with 552, at MAIL FROM when the
 * client declares it and after DATA otherwise; a malformed message, or one over the parsing
 * limits (INBOUND_PARSE_LIMITS), gets 550 5.6.0; a storage error 451 (the sender retries); a
 * session idle for IDLE_TIMEOUT_MS is closed, and one whose message takes longer than
 * MAX_DATA_PHASE_MS or that lasts longer than MAX_SESSION_MS gets 421 4.4.2 and is closed. No
 * AUTH, no STARTTLS: it accepts mail for its own addresses only, so it relays nothing.
 */
export class InboundSmtpServer {
  private readonly server: SMTPServer;
  /** By session id. */
  private readonly limits = new Map<string, SessionLimits>();
  port = 0;

  constructor(
    private readonly inbound: InboundMailService,
    private readonly logger: Logger,
    private readonly options: InboundSmtpOptions,
  ) {
    this.server = new SMTPServer({
      logger: false,
      name: options.hostname,
      banner: 'Clarion inbound mail',
      disabledCommands: ['AUTH', 'STARTTLS'],
      authOptional: true,
      size: options.maxBytes,
      rejectOversized: true,
      maxRecipients: MAX_RECIPIENTS,
      maxClients: MAX_CLIENTS,
      socketTimeout: IDLE_TIMEOUT_MS,
      onConnect: (session, callback) => {
        for (const connection of this.server.connections) {
          if (connection.id === session.id) this.limits.set(session.id, new SessionLimits(connection, options.maxSessionMs ?? MAX_SESSION_MS));
        }
        callback();
      },
      onClose: (session) => {
        this.limits.get(session.id)?.end();
        this.limits.delete(session.id);
      },
      onRcptTo: (address, _session, callback) => {
        this.inbound.findRecipient(address.address).then(
          (row) => callback(row ? undefined : smtpError(550, `5.1.1 <${address.address}>: no such address here (it is not an inbound address of any account)`)),
          (err: unknown) => {
            this.logger.error({ err }, 'inbound SMTP: recipient lookup failed');
            callback(smtpError(451, '4.3.0 Temporary failure, try again later'));
          },
        );
      },
      onData: (stream, session, callback) => {
        const limits = this.limits.get(session.id);
        let chunks: Buffer[] = [];
        let dropped = false;
        limits?.dataStarted(options.maxDataPhaseMs ?? MAX_DATA_PHASE_MS, () => {
          dropped = true;
          chunks = [];
        });
        stream.on('data', (chunk: Buffer) => {
          // Past the limit nothing more is kept; smtp-server answers 552 (rejectOversized).
          if (!stream.sizeExceeded && !dropped) chunks.push(chunk);
        });
        stream.on('error', (err) => callback(err));
        stream.on('end', () => {
          limits?.dataEnded();
          // The end was already read when a limit passed: the session is closed, no reply goes out.
          if (dropped) {
            callback(smtpError(421, '4.4.2 Message dropped'));
            return;
          }
          if (stream.sizeExceeded) {
            callback(smtpError(552, `5.3.4 Message exceeds the size limit of ${options.maxBytes} bytes`));
            return;
          }
          const client = session.remoteAddress ? { ip: session.remoteAddress } : {};
          const store = () => this.deliver(Buffer.concat(chunks), session.envelope.rcptTo.map((r) => r.address), client).then(() => callback(), (err: Error) => callback(err));
          void (limits ? limits.whileStoring(store) : store());
        });
      },
    });
    // A port that cannot be listened on is listen()'s failure, reported once by the start.
    this.server.on('error', (err: NodeJS.ErrnoException) => {
      if (err.syscall !== 'listen') this.logger.warn({ err }, 'inbound SMTP connection error');
    });
  }

  private async deliver(raw: Buffer, addresses: string[], client: { ip?: string }): Promise<void> {
    // Looked up again: an address deleted since RCPT gets nothing.
    const recipients = (await Promise.all(addresses.map((a) => this.inbound.findRecipient(a)))).filter((r): r is InboundRecipient => !!r);
    if (recipients.length === 0) throw smtpError(550, '5.1.1 None of the recipients is an inbound address any more');
    try {
      await this.inbound.receive(raw, recipients, client, this.options.parseLimits ?? INBOUND_PARSE_LIMITS);
    } catch (err) {
      if (err instanceof InboundRefusal) throw smtpError(err.responseCode, err.message);
      this.logger.error({ err }, 'inbound SMTP: could not record a message');
      throw smtpError(451, '4.3.0 Temporary failure, try again later');
    }
  }

  async listen(): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        // The code stays, and the fix goes with it: the start reports a port it cannot listen on in one line (main.ts).
        reject(
          err.code === 'EADDRINUSE'
            ? Object.assign(new Error(`the inbound SMTP port ${this.options.host}:${this.options.port} is in use`), { code: err.code, fix: 'set CLARION_INBOUND_SMTP_PORT to a free port, or to off' })
            : err,
        );
      };
      this.server.server.once('error', onError);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.server.off('error', onError);
        resolve();
      });
    });
    this.port = (this.server.server.address() as AddressInfo).port;
    this.logger.info({ port: this.port, host: this.options.host }, 'inbound SMTP server listening');
    return this;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

import SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';

/** Where and how each connection of the pool connects (nodemailer's SMTPConnection options). */
export type SmtpConnectionOptions = Pick<
  SMTPConnection.Options,
  'host' | 'port' | 'secure' | 'servername' | 'requireTLS' | 'ignoreTLS' | 'tls' | 'connectionTimeout' | 'greetingTimeout' | 'socketTimeout' | 'name'
>;

export interface SmtpPoolOptions {
  connection: SmtpConnectionOptions;
  auth?: { user: string; pass: string };
  maxConnections: number;
  /** Messages per connection before it is replaced by a fresh one. */
  maxMessages: number;
  /** A connection idle this long says QUIT (below the 5 minutes RFC 5321 asks servers to wait). */
  idleTimeoutMs?: number;
}

export type SmtpEnvelope = { from: string; to: string[] };
export type SmtpSentInfo = SMTPConnection.SentMessageInfo;
type SmtpError = Error & { code?: string; responseCode?: number };

/** A send waiting for a connection. */
interface Waiting {
  envelope: SmtpEnvelope;
  raw: Buffer;
  resolve: (info: SmtpSentInfo) => void;
  reject: (err: Error) => void;
  /** Times it was put back after a reused connection turned out dead. */
  requeued: number;
}

/** One connection of the pool. */
interface Pooled {
  smtp: SMTPConnection;
  sent: number;
  busy: boolean;
  /** Ended, or told to QUIT: never handed another message. */
  gone: boolean;
  /** Holds one of the pool's `maxConnections` slots (a verify() connection does not). */
  slot: boolean;
  idleTimer?: NodeJS.Timeout;
  /** Called when the connection ends while busy with something that has no callback of its own then (RSET). */
  onEnd?: () => void;
}

const IDLE_TIMEOUT_MS = 4 * 60 * 1000;

/** The error ended the connection rather than refused what was sent over it (nodemailer's isTransientError). */
const endedConnection = (err: SmtpError) => err.responseCode === 421 || err.code === 'ECONNECTION' || err.code === 'ESOCKET' || err.code === 'ETIMEDOUT';

/**
 * A small pool of SMTP connections (nodemailer's SMTPConnection) that sends messages already
 * built (a Buffer each), used instead of nodemailer's pooled transport. Measured into the same
 * loopback sink (bench/email-raw-sender.ts): five SMTPConnection loops sent 1,307 msg/s, the
 * pooled transport 933, and used 410-575 µs of CPU per mail against 665-995 (busy host): the
 * transport streams each message
 * from its MIME tree into the socket in many small writes, and after a connection reaches its
 * message limit it waits 100 ms before it sends on a new one.
 *
 * What the pooled transport did and this keeps: at most `maxConnections`, `maxMessages` per
 * connection, AUTH when the server offers it, a refused envelope or message resets the session
 * and keeps the connection (not after a 421), a connection the server ended while idle is
 * forgotten, a message that finds its reused connection dead goes out once more on a fresh one
 * (the job would send it again anyway, with the same Message-ID), idle connections say QUIT
 * after 4 minutes.
 */
export class SmtpPool {
  private readonly waiting: Waiting[] = [];
  private readonly idle: Pooled[] = [];
  /** Slots taken: connections open or opening. */
  private slots = 0;
  private closed = false;

  constructor(private readonly options: SmtpPoolOptions) {}

  /** Sends one message; rejects with nodemailer's SMTP error (code, responseCode, response, command...). */
  send(envelope: SmtpEnvelope, raw: Buffer): Promise<SmtpSentInfo> {
    if (this.closed) return Promise.reject(poolClosed());
    return new Promise((resolve, reject) => {
      this.waiting.push({ envelope, raw, resolve, reject, requeued: 0 });
      this.pump();
    });
  }

  /** Opens a connection and authenticates, without sending (settings check). */
  async verify(): Promise<void> {
    const pooled = await this.connect(false);
    this.retire(pooled);
  }

  /** Closes the idle connections (busy ones once their message is sent); sends still waiting fail. */
  close(): void {
    this.closed = true;
    for (const w of this.waiting.splice(0)) w.reject(poolClosed());
    for (const c of [...this.idle]) this.retire(c);
  }

  /** Hands waiting messages to idle connections, opening new ones up to the limit. */
  private pump(): void {
    while (this.waiting.length > 0 && !this.closed) {
      const free = this.idle.pop();
      if (free) {
        this.transmit(free, this.waiting.shift()!);
      } else if (this.slots < this.options.maxConnections) {
        const first = this.waiting.shift()!;
        this.connect(true).then(
          (pooled) => this.transmit(pooled, first),
          (err: Error) => first.reject(err),
        );
      } else {
        return;
      }
    }
  }

  /** A connected (and logged in) SMTPConnection whose errors and end are watched. */
  private connect(slot: boolean): Promise<Pooled> {
    const smtp = new SMTPConnection({ ...this.options.connection });
    const pooled: Pooled = { smtp, sent: 0, busy: true, gone: false, slot };
    if (slot) this.slots++;
    return new Promise<Pooled>((resolve, reject) => {
      let ready = false;
      const fail = (err: Error) => {
        if (ready) return;
        ready = true;
        smtp.close();
        this.drop(pooled);
        reject(err);
      };
      // An error closes the connection. While it sends, the send's callback gets the same error.
      const ended = () => {
        pooled.gone = true;
        if (pooled.onEnd) pooled.onEnd();
        else if (!pooled.busy) this.drop(pooled);
      };
      smtp.on('error', (err: Error) => (ready ? ended() : fail(err)));
      smtp.once('end', () => (ready ? ended() : fail(Object.assign(new Error('Connection closed'), { code: 'ECONNECTION' }))));
      smtp.connect((err) => {
        if (err) return fail(err);
        const auth = this.options.auth;
        const done = () => {
          if (ready) return;
          ready = true;
          resolve(pooled);
        };
        // As nodemailer's pool: credentials are used when the server offers AUTH.
        if (!auth || !smtp.allowsAuth) return done();
        smtp.login({ user: auth.user, credentials: { user: auth.user, pass: auth.pass } }, (loginErr) => (loginErr ? fail(loginErr) : done()));
      });
    });
  }

  private transmit(pooled: Pooled, w: Waiting): void {
    pooled.busy = true;
    if (pooled.idleTimer) clearTimeout(pooled.idleTimer);
    const reused = pooled.sent > 0;
    pooled.smtp.send(w.envelope, w.raw, (err, info) => {
      pooled.sent++;
      pooled.busy = false;
      if (!err) {
        w.resolve(info);
        return this.release(pooled);
      }
      const e = err as SmtpError;
      if (reused && endedConnection(e) && w.requeued === 0 && !this.closed) {
        // The server ended a connection used before (idle too long, say): once more on a fresh one.
        w.requeued++;
        this.waiting.unshift(w);
        return this.retire(pooled);
      }
      if ((e.code === 'EENVELOPE' || e.code === 'EMESSAGE') && e.responseCode !== 421 && !pooled.gone) {
        // The server refused this message, not the session: reset it and keep the connection
        // (answered once reset, so that the caller's next message finds the connection free).
        pooled.busy = true;
        let answered = false;
        const answer = (keep: boolean) => {
          if (answered) return;
          answered = true;
          pooled.busy = false;
          pooled.onEnd = undefined;
          w.reject(err);
          if (keep) this.release(pooled);
          else this.retire(pooled);
        };
        // A connection that ends during RSET never calls back: its end answers instead.
        pooled.onEnd = () => answer(false);
        pooled.smtp.reset((resetErr) => answer(!resetErr));
        return;
      }
      w.reject(err);
      this.retire(pooled);
    });
  }

  /** Back to the idle list, or replaced when it reached its message limit. */
  private release(pooled: Pooled): void {
    if (pooled.gone || this.closed || pooled.sent >= this.options.maxMessages) return this.retire(pooled);
    this.idle.push(pooled);
    pooled.idleTimer = setTimeout(() => this.retire(pooled), this.options.idleTimeoutMs ?? IDLE_TIMEOUT_MS);
    pooled.idleTimer.unref();
    this.pump();
  }

  /** Says QUIT (a dead connection is closed already) and frees its slot. */
  private retire(pooled: Pooled): void {
    if (!pooled.gone) {
      pooled.gone = true;
      pooled.smtp.quit();
    }
    this.drop(pooled);
  }

  /** Forgets a connection that ended or was retired, frees its slot and serves who waits; idempotent. */
  private drop(pooled: Pooled): void {
    pooled.gone = true;
    if (pooled.idleTimer) clearTimeout(pooled.idleTimer);
    const at = this.idle.indexOf(pooled);
    if (at >= 0) this.idle.splice(at, 1);
    if (pooled.slot) {
      pooled.slot = false;
      this.slots--;
      this.pump();
    }
  }
}

function poolClosed(): Error {
  return Object.assign(new Error('Connection pool was closed'), { code: 'ECONNECTION' });
}

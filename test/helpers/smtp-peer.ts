import type { AddressInfo } from 'node:net';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer, type SMTPServerAddress, type SMTPServerSession } from 'smtp-server';

/** One message the peer accepted, as the far end saw it. */
export interface ReceivedMail {
  envelope: { from: string; to: string[] };
  parsed: ParsedMail;
  raw: Buffer;
  /** smtp-server's id of the connection it arrived on (pool reuse shows as one id). */
  connectionId: string;
  user?: string;
}

export interface SmtpPeerOptions {
  /** RCPT TO answers by address (lower case): 550 = unknown user, 451 = try later. */
  reject?: Record<string, 550 | 451 | 452 | 553>;
  /** Require AUTH PLAIN/LOGIN with these credentials. */
  auth?: { user: string; pass: string };
  /** Answer the DATA phase with this code instead of accepting. */
  rejectData?: 552 | 554 | 451;
  /** With rejectData: refuse only this many messages, then accept (a server that is briefly unavailable). */
  rejectDataTimes?: number;
  /** Recipients (lower case) whose message's answer to DATA waits for release() (a server that hangs). */
  holdData?: string[];
}

export interface SmtpPeer {
  port: number;
  /** `smtp://127.0.0.1:<port>` (with credentials when auth is configured). */
  url: string;
  messages: ReceivedMail[];
  /** Connections opened so far. */
  connections: number;
  options: SmtpPeerOptions;
  /** Connection errors smtp-server reported (resets inside a mail transaction). */
  socketErrors: Error[];
  /** Resolves once `count` messages have arrived. */
  waitFor(count: number): Promise<ReceivedMail[]>;
  /** Messages whose answer is held (holdData) so far, released or not. */
  held: number;
  /** Resolves once `count` messages have been held. */
  waitForHeld(count: number): Promise<void>;
  /** Answers every held message, as the peer would have without holdData. */
  release(): void;
  /** Ends every open connection from the server's side (as a server's idle timeout does); keeps listening. */
  dropConnections(): void;
  close(): Promise<void>;
}

const TEXT: Record<number, string> = {
  550: '5.1.1 Recipient address rejected: User unknown',
  553: '5.1.3 Bad recipient address syntax',
  451: '4.3.0 Temporary failure, try again later',
  452: '4.2.2 Mailbox full',
  552: '5.3.4 Message size exceeds fixed limit',
  554: '5.7.1 Message rejected as spam',
};

function smtpError(code: number): Error {
  const err = new Error(TEXT[code] ?? 'rejected') as Error & { responseCode: number };
  err.responseCode = code;
  return err;
}

/** A real SMTP server on loopback that parses and records every message it accepts. */
export async function startSmtpPeer(options: SmtpPeerOptions = {}): Promise<SmtpPeer> {
  const messages: ReceivedMail[] = [];
  const waiters: { count: number; resolve: (m: ReceivedMail[]) => void }[] = [];
  const sockets = new Set<{ destroy(): void }>();
  const state = { connections: 0, dataRejected: 0, held: 0 };
  const heldAnswers: (() => void)[] = [];
  const heldWaiters: { count: number; resolve: () => void }[] = [];

  const server = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    // No TLS on loopback: nodemailer would otherwise upgrade to STARTTLS against a self-signed certificate.
    disabledCommands: options.auth ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    allowInsecureAuth: true,
    authOptional: !options.auth,
    onConnect(session, callback) {
      state.connections++;
      callback();
    },
    onAuth(auth, _session, callback) {
      if (options.auth && auth.username === options.auth.user && auth.password === options.auth.pass) {
        return callback(null, { user: auth.username });
      }
      const err = new Error('5.7.8 Authentication credentials invalid') as Error & { responseCode: number };
      err.responseCode = 535;
      return callback(err);
    },
    onRcptTo(address: SMTPServerAddress, _session, callback) {
      const code = peer.options.reject?.[address.address.toLowerCase()];
      if (code) return callback(smtpError(code));
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (session.envelope.rcptTo.some((r) => peer.options.holdData?.includes(r.address.toLowerCase()))) {
          state.held++;
          heldAnswers.push(() => answer(chunks, session, callback));
          for (const w of heldWaiters.filter((h) => state.held >= h.count)) {
            heldWaiters.splice(heldWaiters.indexOf(w), 1);
            w.resolve();
          }
          return;
        }
        answer(chunks, session, callback);
      });
    },
  });
  /** The answer to DATA: the configured refusal, or the message parsed and recorded. */
  function answer(chunks: Buffer[], session: SMTPServerSession, callback: (err?: Error | null, message?: string) => void): void {
    const { rejectData, rejectDataTimes } = peer.options;
    if (rejectData && (rejectDataTimes === undefined || state.dataRejected < rejectDataTimes)) {
      state.dataRejected++;
      return callback(smtpError(rejectData));
    }
    const raw = Buffer.concat(chunks);
    simpleParser(raw)
      .then((parsed) => {
        messages.push({
          envelope: {
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
          },
          parsed,
          raw,
          connectionId: session.id,
          ...(session.user ? { user: String(session.user) } : {}),
        });
        for (const w of [...waiters]) {
          if (messages.length >= w.count) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(messages.slice());
          }
        }
        callback(null, `2.0.0 Ok: queued as ${session.id}`);
      })
      .catch((err: Error) => callback(err));
  }
  server.server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  // smtp-server reports a reset inside a mail transaction as an 'error' on the server; a killed
  // sender resets every pooled connection at once. Without a lasting listener the EventEmitter
  // throws them as uncaught exceptions (a one-shot listener took only the first).
  const socketErrors: Error[] = [];
  server.on('error', (err: Error) => socketErrors.push(err));
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;
  const creds = options.auth ? `${encodeURIComponent(options.auth.user)}:${encodeURIComponent(options.auth.pass)}@` : '';

  const peer: SmtpPeer = {
    port,
    url: `smtp://${creds}127.0.0.1:${port}`,
    messages,
    get connections() {
      return state.connections;
    },
    options,
    socketErrors,
    waitFor(count) {
      if (messages.length >= count) return Promise.resolve(messages.slice());
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    get held() {
      return state.held;
    },
    waitForHeld(count) {
      if (state.held >= count) return Promise.resolve();
      return new Promise((resolve) => heldWaiters.push({ count, resolve }));
    },
    release() {
      for (const answerHeld of heldAnswers.splice(0)) answerHeld();
    },
    dropConnections() {
      for (const s of sockets) s.destroy();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return peer;
}

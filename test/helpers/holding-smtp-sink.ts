import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/**
 * An SMTP sink that answers the first `answerFirst` messages and holds the answer to every later
 * one until answerAll(): those are in flight (sent, not acknowledged) for as long as the test
 * wants, so a kill lands while deliveries are on the wire, whatever the machine's speed.
 */
export async function holdingSink(answerFirst: number) {
  const received: { subject: string; messageId: string; html: string }[] = [];
  let answering = false;
  let answered = 0;
  let held = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, _session, callback) {
      simpleParser(stream).then(
        (mail) => {
          received.push({ subject: mail.subject ?? '', messageId: mail.messageId ?? '', html: typeof mail.html === 'string' ? mail.html : '' });
          if (answering || answered < answerFirst) {
            answered++;
            callback();
          } else held++; // never answered: its sender is killed with the message in flight
        },
        (err) => callback(err),
      );
    },
  });
  // smtp-server reports a connection's socket errors on the server; the killed process resets
  // its connections (ECONNRESET), which is the point of the tests. Without a listener the
  // EventEmitter would throw it as an uncaught exception.
  const socketErrors: Error[] = [];
  server.on('error', (err: Error) => socketErrors.push(err));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    received,
    socketErrors,
    url: `smtp://127.0.0.1:${port}`,
    answered: () => answered,
    held: () => held,
    /** From now on every message is answered at once. */
    answerAll: () => {
      answering = true;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

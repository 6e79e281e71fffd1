// The raw baseline of the email bench, in its own process as Clarion's worker is: sends EMAILS
// mails to the SMTP sink at 127.0.0.1:SINK_PORT with SENDER's way, then exits.
import { type KeyObject, createPrivateKey } from 'node:crypto';
import fs from 'node:fs';
import nodemailer from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer';
import SMTPConnection from 'nodemailer/lib/smtp-connection';

const HTML = '<h1>Hello</h1><p>Your order has shipped. Track it in your account.</p>';
// The broadcast bench passes the sender its own From and DKIM key (RAW_FROM, DKIM_*), so that the
// baseline signs as Clarion signs the mail of a verified domain.
const FROM = process.env.RAW_FROM ?? 'notifications@clarion.localhost';
/**
 * The key as nodemailer's documentation passes it (a PEM string, which its signer parses again
 * for every mail), or with DKIM_KEY_PARSED=1 parsed once into a KeyObject, which its signer
 * hands to crypto's Sign.sign as it is: the same signatures without a parse per mail.
 */
const privateKey = (pem: string): string => (process.env.DKIM_KEY_PARSED === '1' ? (createPrivateKey(pem) satisfies KeyObject as unknown as string) : pem);
const DKIM = process.env.DKIM_KEY_FILE
  ? { domainName: process.env.DKIM_DOMAIN ?? '', keySelector: process.env.DKIM_SELECTOR ?? 'bench', privateKey: privateKey(fs.readFileSync(process.env.DKIM_KEY_FILE, 'utf8')) }
  : undefined;
const CONNECTIONS = 5;
const MESSAGES_PER_CONNECTION = 100;

const mail = (i: number) => ({
  from: { name: 'Clarion', address: FROM },
  to: `user${i}@example.com`,
  subject: 'Your order shipped',
  html: HTML,
  text: 'Hello. Your order has shipped.',
});

/** The pool Clarion uses: 5 connections, 100 messages each. */
const pooledTransport = (port: number) =>
  nodemailer.createTransport({
    host: '127.0.0.1',
    port,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: CONNECTIONS,
    maxMessages: MESSAGES_PER_CONNECTION,
    ...(DKIM ? { dkim: DKIM } : {}),
  });

/** nodemailer's pooled SMTP transport as its documentation shows it: one transport, every mail handed to it. */
async function nodemailerPool(port: number, n: number): Promise<void> {
  const transport = pooledTransport(port);
  await Promise.all(Array.from({ length: n }, (_, i) => transport.sendMail(mail(i))));
  transport.close();
}

/** The pooled transport handed each mail as one buffer built beforehand (MailComposer), the `raw` option. */
async function nodemailerPoolPrebuilt(port: number, n: number): Promise<void> {
  const transport = pooledTransport(port);
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const raw = await new MailComposer(mail(i)).compile().build();
      return transport.sendMail({ envelope: { from: FROM, to: [`user${i}@example.com`] }, raw });
    }),
  );
  transport.close();
}

/**
 * nodemailer one level down: five SMTPConnection loops, a new connection every 100 mails, each
 * mail built by MailComposer; no transport, no queue, no pool bookkeeping.
 */
async function nodemailerConnections(port: number, n: number): Promise<void> {
  let next = 0;
  const connect = async () => {
    const connection = new SMTPConnection({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
    await new Promise<void>((resolve, reject) => {
      connection.once('error', reject);
      connection.connect(() => resolve());
    });
    return connection;
  };
  const loop = async () => {
    while (next < n) {
      const connection = await connect();
      for (let sent = 0; sent < MESSAGES_PER_CONNECTION && next < n; sent++) {
        const i = next++;
        const raw = await new MailComposer(mail(i)).compile().build();
        await new Promise((resolve, reject) =>
          connection.send({ from: FROM, to: [`user${i}@example.com`] }, raw, (err, info) => (err ? reject(err) : resolve(info))),
        );
      }
      connection.quit();
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, loop));
}

export const RAW_SENDERS = {
  'nodemailer pool': nodemailerPool,
  'nodemailer pool, prebuilt': nodemailerPoolPrebuilt,
  'nodemailer SMTPConnection x5': nodemailerConnections,
} as const;
export type RawSender = keyof typeof RAW_SENDERS;

if (process.env.SINK_PORT) {
  const sender = RAW_SENDERS[process.env.SENDER as RawSender];
  if (!sender) throw new Error(`unknown SENDER ${process.env.SENDER}`);
  // The bench's clock starts here: building the mails is part of the work measured. With it, the
  // process's CPU time so far (µs), and at the end the CPU time then: CPU per mail.
  const cpu = () => {
    const { user, system } = process.cpuUsage();
    return user + system;
  };
  // Warm-up mails first (WARM_EMAILS, not measured): the JIT compiles the sender's code as it
  // would in a process that has been sending for a while.
  const warm = Number(process.env.WARM_EMAILS ?? 0);
  if (warm > 0) await sender(Number(process.env.SINK_PORT), warm);
  process.stdout.write(`START ${cpu()}\n`);
  await sender(Number(process.env.SINK_PORT), Number(process.env.EMAILS));
  process.stdout.write(`DONE ${cpu()}\n`);
  process.exit(0);
}

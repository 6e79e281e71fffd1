import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { dkimVerify } from 'mailauth';
import { simpleParser } from 'mailparser';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { afterEach, describe, expect, it } from 'vitest';
import { MimeBuilder, buildMime } from '../../src/channels/email/mime-builder.js';
import { eventually } from '../helpers/wait.js';

const pdf = randomBytes(20_000);
const options: Mail.Options = {
  from: { name: 'Clarion Team', address: 'team@clarion.test' },
  to: { name: 'Ada', address: 'ada@example.test' },
  cc: [{ name: '', address: 'cc@example.test' }],
  bcc: [{ name: '', address: 'audit@example.test' }],
  subject: 'Your report — ready',
  html: '<p>Hello <b>Ada</b></p>',
  text: 'Hello Ada',
  messageId: '<d-1@clarion.test>',
  headers: { 'X-Clarion-Tracking': 'trk' },
  attachments: [{ filename: 'report.pdf', content: pdf, contentType: 'application/pdf' }],
  disableFileAccess: true,
  disableUrlAccess: true,
};

describe('MimeBuilder', () => {
  let builder: MimeBuilder | undefined;
  afterEach(async () => {
    await builder?.close();
  });

  it('signs on its thread with the DKIM key it is given, as on the calling thread', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const dkim = { domainName: 'clarion.test', keySelector: 'sel', privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
    const record = `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
    const resolver = (name: string) => (name === 'sel._domainkey.clarion.test' ? Promise.resolve([[record]]) : Promise.reject(Object.assign(new Error('NXDOMAIN'), { code: 'ENOTFOUND' })));
    builder = new MimeBuilder();
    expect(await builder.whenReady()).toBe(true);
    const signed = { ...options, headers: { ...options.headers, 'List-Unsubscribe': '<https://u.test/x>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' } };
    for (const built of await Promise.all([builder.build(signed, dkim), buildMime(signed, dkim)])) {
      expect(built.raw.subarray(0, 15).toString()).toBe('DKIM-Signature:');
      const result = await dkimVerify(built.raw, { resolver });
      expect(result.results[0].status.result).toBe('pass');
    }
    // A key that cannot sign is an error, not an unsigned message.
    await expect(builder.build(options, { ...dkim, privateKey: 'not a key' })).rejects.toThrow(/DKIM signing failed/);
    // Signed on the thread pool while the next ones are composed: each answer is its own mail, signed.
    const subjects = Array.from({ length: 6 }, (_, i) => `Report ${i}`);
    const batch = await Promise.all(subjects.map((subject, i) => builder!.build({ ...options, subject, attachments: [] }, i % 3 === 2 ? undefined : dkim)));
    for (const [i, built] of batch.entries()) {
      expect((await simpleParser(built.raw)).subject).toBe(subjects[i]);
      if (i % 3 === 2) expect(built.raw.subarray(0, 15).toString()).not.toBe('DKIM-Signature:');
      else expect((await dkimVerify(built.raw, { resolver })).results[0].status.result).toBe('pass');
    }
  });

  it('lets its thread go once idle for idleMs, and builds the same message on a new one after', async () => {
    builder = new MimeBuilder({ idleMs: 20 });
    expect(builder.threadRunning).toBe(false);
    expect(await builder.whenReady()).toBe(true);
    expect((await simpleParser((await builder.build(options)).raw)).subject).toBe(options.subject);
    await eventually(() => !builder!.threadRunning, 10_000, 'the idle MIME thread to exit');
    expect(await builder.whenReady()).toBe(true);
    expect(builder.threadRunning).toBe(true);
    const [again, here] = await Promise.all([builder.build(options), buildMime(options)]);
    expect(again.envelope).toEqual(here.envelope);
    const [parsedThere, parsedHere] = await Promise.all([simpleParser(again.raw), simpleParser(here.raw)]);
    expect(parsedThere.subject).toBe(parsedHere.subject);
    expect(parsedThere.html).toBe(parsedHere.html);
    expect(parsedThere.attachments.map((a) => a.content.equals(pdf))).toEqual([true]);
  });

  it('builds on its thread the message MailComposer builds here: envelope, headers, parts, attachments', async () => {
    builder = new MimeBuilder();
    expect(await builder.whenReady()).toBe(true);
    const [there, here] = await Promise.all([builder.build(options), buildMime(options)]);
    expect(there.envelope).toEqual(here.envelope);
    expect(there.envelope).toEqual({ from: 'team@clarion.test', to: ['ada@example.test', 'cc@example.test', 'audit@example.test'] });
    expect(Buffer.isBuffer(there.raw)).toBe(true);
    const [a, b] = await Promise.all([simpleParser(there.raw), simpleParser(here.raw)]);
    for (const mail of [a, b]) {
      expect(mail.subject).toBe('Your report — ready');
      expect(mail.messageId).toBe('<d-1@clarion.test>');
      expect(mail.headers.get('x-clarion-tracking')).toBe('trk');
      expect(mail.html).toBe('<p>Hello <b>Ada</b></p>');
      expect(mail.text).toBe('Hello Ada');
      expect(mail.bcc).toBeUndefined();
      expect(mail.attachments.map((x) => [x.filename, x.contentType, x.content.equals(pdf)])).toEqual([['report.pdf', 'application/pdf', true]]);
    }
  });

  it('builds one message at a time in the order they came: a large first one is answered before the small ones behind it, a failed one holds up none', async () => {
    builder = new MimeBuilder();
    expect(await builder.whenReady()).toBe(true);
    const large = { ...options, attachments: [{ filename: 'big.bin', content: randomBytes(3_000_000), contentType: 'application/octet-stream' }] };
    const small = { ...options, attachments: [] };
    const answered: string[] = [];
    const track = (name: string, built: Promise<unknown>) => built.then(() => answered.push(name), () => answered.push(`${name} failed`));
    await Promise.all([
      track('large', builder.build(large)),
      track('bad key', builder.build(small, { domainName: 'clarion.test', keySelector: 'sel', privateKey: 'not a key' })),
      ...Array.from({ length: 8 }, (_, i) => track(`small ${i}`, builder!.build(small))),
    ]);
    // Built side by side, the small ones (a few setImmediate steps each) ended long before the large one.
    expect(answered).toEqual(['large', 'bad key failed', ...Array.from({ length: 8 }, (_, i) => `small ${i}`)]);
  });

  it('builds on the calling thread once closed', async () => {
    builder = new MimeBuilder();
    await builder.close();
    expect(await builder.whenReady()).toBe(false);
    const built = await builder.build(options);
    expect((await simpleParser(built.raw)).subject).toBe('Your report — ready');
  });
});

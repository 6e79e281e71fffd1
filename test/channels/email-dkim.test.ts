// The one-pass DKIM signer (channels/email/dkim.ts) against nodemailer's streaming signer, which it
// replaced: RSA PKCS#1 v1.5 signatures are deterministic, so for the same message and key the two
// must give the same bytes, on built messages and on the corner cases of relaxed canonicalization
// (trailing and repeated whitespace, empty lines at the end, bare LF and CR, folded and repeated
// fields, a body-less message). An independent verifier (mailauth, the public key handed to it
// without DNS) accepts what it signs and refuses it once altered.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { dkimVerify } from 'mailauth';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import DKIM from 'nodemailer/lib/dkim/index.js';
import type Mail from 'nodemailer/lib/mailer/index.js';
import { describe, expect, it } from 'vitest';
import { DKIM_SIGNED_HEADERS, DkimSigner } from '../../src/channels/email/dkim.js';

const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
const key = { domainName: 'news.example.test', keySelector: 'sel', privateKey: pem };
const record = `v=DKIM1; k=rsa; p=${publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`;
const resolver = (name: string) =>
  name === 'sel._domainkey.news.example.test' ? Promise.resolve([[record]]) : Promise.reject(Object.assign(new Error('NXDOMAIN'), { code: 'ENOTFOUND' }));

/** What nodemailer's DKIM signer makes of the message, with the same key and header list. */
async function nodemailerSigned(raw: Buffer, signingKey = key): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const signer = new DKIM({ ...signingKey, headerFieldNames: DKIM_SIGNED_HEADERS });
  for await (const chunk of signer.sign(raw)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const built = (options: Mail.Options) => new MailComposer({ disableFileAccess: true, disableUrlAccess: true, ...options }).compile().build();

const mail: Mail.Options = {
  from: { name: 'News', address: 'hello@news.example.test' },
  to: 'ada@example.com',
  subject: 'Spring release — notes',
  html: '<h1>Hello Ada</h1>\n<p>Our spring   release is out.\t<a href="https://example.com/r">Read</a></p>   \n\n\n',
  text: 'Hello Ada\n\nOur spring release is out.   \n\n\n',
  messageId: '<d-1@clarion>',
  headers: { 'List-Unsubscribe': '<https://clarion.example.test/u/abc>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
};

/** Messages written by hand: the bytes MailComposer never makes but a signer must canonicalize right. */
const handWritten: Record<string, string> = {
  'trailing, repeated and leading whitespace; empty lines inside and at the end':
    'From: a@news.example.test\r\nTo: b@example.com\r\nSubject:   spaced \t out  \r\n\r\n  lead\tand  inner  \r\n\r\n \t \r\nlast line \t\r\n\r\n\r\n \r\n',
  'bare LF line ends, a lone CR as content, no line end at the end': 'From: a@news.example.test\nSubject: bare\n\nline one\nwith\rcr \r\n\n\nend \r',
  'folded, repeated and unsigned fields, a name with spaces before its colon':
    'Received: x\r\nFrom: a@news.example.test\r\nSubject: first\r\nTo: b@example.com,\r\n\t c@example.com\r\nSubject: second\r\n  continued\r\nX-Other: y\r\nDate  : Mon, 1 Jan 2024 00:00:00 +0000\r\n\r\nbody\r\n',
  'one empty line between two, as the parts of a message have': 'From: a@news.example.test\r\n\r\nfirst\r\n\r\nsecond\r\n',
  'an empty body': 'From: a@news.example.test\r\nSubject: nothing\r\n\r\n',
  'only empty lines in the body': 'From: a@news.example.test\r\nSubject: blank\r\n\r\n\r\n\r\n  \r\n',
  'no empty line: all header': 'From: a@news.example.test\r\nSubject: no body\r\n',
  'header bytes beyond ASCII': 'From: =?UTF-8?Q?Ad=C3=A1?= <a@news.example.test>\r\nSubject: caf\xc3\xa9  \xa0 bar\r\n\r\ncaf\xc3\xa9\r\n',
};

describe('DKIM signing in one pass', () => {
  it('gives the bytes nodemailer’s signer gives for built messages, with and without an attachment', async () => {
    const signer = new DkimSigner();
    const messages = [
      await built(mail),
      await built({ ...mail, attachments: [{ filename: 'report.pdf', content: randomBytes(50_000), contentType: 'application/pdf' }] }),
      await built({ ...mail, html: `<p>${'long line without a break '.repeat(200)}</p>`, text: undefined }),
    ];
    for (const raw of messages) {
      const signed = await signer.sign(raw, key);
      expect(signed.toString('latin1')).toBe((await nodemailerSigned(raw)).toString('latin1'));
      expect(signed.subarray(signed.length - raw.length).equals(raw)).toBe(true);
      expect((await dkimVerify(signed, { resolver })).results[0].status.result).toBe('pass');
    }
  });

  it.each(Object.entries(handWritten))('gives the bytes nodemailer’s signer gives: %s', async (_name, text) => {
    const raw = Buffer.from(text, 'latin1');
    expect((await new DkimSigner().sign(raw, key)).toString('latin1')).toBe((await nodemailerSigned(raw)).toString('latin1'));
  });

  it('writes the domain as its A-label and keeps tag values from opening tags', async () => {
    const raw = await built(mail);
    const odd = { ...key, domainName: 'Bücher.example.test', keySelector: 'sel;x=1' };
    const signed = (await new DkimSigner().sign(raw, odd)).toString('latin1');
    expect(signed).toBe((await nodemailerSigned(raw, odd)).toString('latin1'));
    const header = signed.split('\r\n\r\n')[0].replace(/\r\n[ \t]+/g, ' ');
    expect(header).toMatch(/\bd=xn--bcher-kva\.example\.test;/);
    expect(header).toMatch(/\bs=selx1;/);
  });

  it('is accepted by mailauth, and refused once the body or a signed field changes', async () => {
    const signed = await new DkimSigner().sign(await built(mail), key);
    const result = await dkimVerify(signed, { resolver });
    expect(result.results[0].status.result).toBe('pass');
    expect(result.results[0].signingDomain).toBe('news.example.test');
    const text = signed.toString('latin1');
    // Whitespace changes that relaxed canonicalization ignores still verify.
    const respaced = text.replace('Our spring   release', 'Our spring release').replace(/\r\n\r\n$/, '\r\n\r\n\r\n\r\n');
    expect(respaced).not.toBe(text);
    expect((await dkimVerify(Buffer.from(respaced, 'latin1'), { resolver })).results[0].status.result).toBe('pass');
    const body = text.replace('Hello Ada', 'Hello Bob');
    expect((await dkimVerify(Buffer.from(body, 'latin1'), { resolver })).results[0].status).toMatchObject({ result: 'neutral', comment: 'body hash did not verify' });
    const unsubscribe = text.replace('clarion.example.test/u/abc', 'evil.example.test/u/abc');
    expect(unsubscribe).not.toBe(text);
    expect((await dkimVerify(Buffer.from(unsubscribe, 'latin1'), { resolver })).results[0].status.result).toBe('fail');
  });

  it('signs the mails that follow with the key it parsed, and a new key once given one', async () => {
    const signer = new DkimSigner();
    const raw = await built(mail);
    const first = await signer.sign(raw, key);
    expect((await signer.sign(raw, { ...key })).equals(first)).toBe(true);
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const rotated = await signer.sign(raw, { ...key, privateKey: other });
    expect(rotated.equals(first)).toBe(false);
    expect(rotated.toString('latin1')).toBe((await nodemailerSigned(raw, { ...key, privateKey: other })).toString('latin1'));
  });

  it('refuses a key that cannot sign rsa-sha256 instead of sending the message unsigned', async () => {
    const raw = await built(mail);
    const signer = new DkimSigner();
    await expect(signer.sign(raw, { ...key, privateKey: 'not a key' })).rejects.toThrow(expect.objectContaining({ code: 'EDKIM', message: 'DKIM signing failed for news.example.test' }));
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    await expect(signer.sign(raw, { ...key, privateKey: ec })).rejects.toThrow(/DKIM signing failed/);
  });
});

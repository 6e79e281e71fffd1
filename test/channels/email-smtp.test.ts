import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AddressObject } from 'mailparser';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SmtpEmailProvider, maskSmtpUrl, parseSmtpUrl } from '../../src/channels/email/smtp.js';
import { DeliveryError, type EmailMessage } from '../../src/channels/types.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';

const pdfBytes = randomBytes(50_000);
const pngBytes = randomBytes(3000);

let files: http.Server;
let filesBase: string;

beforeAll(async () => {
  files = http.createServer((req, res) => {
    if (req.url === '/report.pdf') {
      res.writeHead(200, { 'content-type': 'application/pdf' });
      res.end(pdfBytes);
    } else if (req.url === '/huge') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(Buffer.alloc(2048));
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
  filesBase = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
});
afterAll(async () => {
  files.closeAllConnections();
  await new Promise((resolve) => files.close(resolve));
});

function message(overrides: Partial<EmailMessage> = {}): EmailMessage {
  return {
    from: { name: 'Clarion Team', address: 'team@clarion.test' },
    to: { name: 'Ada Lovelace', address: 'ada@example.test' },
    replyTo: ['support@clarion.test'],
    cc: ['cc1@example.test'],
    bcc: ['audit@example.test'],
    subject: 'Your report is ready',
    html: '<html><body><h1>Hello Ada</h1><p>Your <b>weekly</b> report is attached.</p><a href="https://example.test/r">Open it</a></body></html>',
    previewText: 'Numbers are up this week',
    messageId: `d-${randomBytes(6).toString('hex')}@clarion.test`,
    meta: { accountId: 'acc', envId: 'env', trackingId: 'trk' },
    ...overrides,
  };
}

const addresses = (a: AddressObject | AddressObject[] | undefined) =>
  (Array.isArray(a) ? a : a ? [a] : []).flatMap((o) => o.value.map((v) => v.address));

describe('SMTP provider against a local SMTP server', () => {
  let peer: SmtpPeer;
  let provider: SmtpEmailProvider;
  afterEach(async () => {
    await provider?.close();
    await peer?.close();
  });

  it('delivers a complete message: headers, envelope, preheader, text part, Message-ID, attachments', async () => {
    peer = await startSmtpPeer({ auth: { user: 'mailer', pass: 'p@ss word' } });
    provider = new SmtpEmailProvider({ url: peer.url, allowPrivateNetworks: true });
    const msg = message({
      attachments: [
        { filename: 'report.pdf', url: `${filesBase}/report.pdf` },
        { filename: 'chart.png', content: pngBytes.toString('base64'), contentType: 'image/png' },
      ],
      headers: { 'X-Clarion-Tracking': 'trk' },
    });
    const result = await provider.send(msg);
    const [got] = await peer.waitFor(1);
    const mail = got.parsed;

    expect(got.user).toBe('mailer');
    expect(mail.from?.value).toEqual([{ name: 'Clarion Team', address: 'team@clarion.test' }]);
    expect(addresses(mail.to)).toEqual(['ada@example.test']);
    expect((mail.to as AddressObject).value[0].name).toBe('Ada Lovelace');
    expect(addresses(mail.cc)).toEqual(['cc1@example.test']);
    expect(addresses(mail.replyTo)).toEqual(['support@clarion.test']);
    // Bcc travels in the envelope only.
    expect(got.envelope.to.sort()).toEqual(['ada@example.test', 'audit@example.test', 'cc1@example.test']);
    expect(got.envelope.from).toBe('team@clarion.test');
    expect(mail.bcc).toBeUndefined();
    expect(got.raw.toString()).not.toMatch(/^bcc:/im);
    expect(got.raw.toString()).not.toContain('audit@example.test');
    expect(mail.subject).toBe('Your report is ready');
    expect(mail.headers.get('x-clarion-tracking')).toBe('trk');

    const html = mail.html as string;
    const body = html.slice(html.indexOf('<body>') + '<body>'.length);
    expect(body.startsWith('<div class="preheader" style="display:none;')).toBe(true);
    expect(body.indexOf('Numbers are up this week')).toBeLessThan(body.indexOf('Hello Ada'));

    expect(mail.text).toContain('Hello Ada');
    expect(mail.text).toContain('Your weekly report is attached.');
    expect(mail.text).toContain('Open it [https://example.test/r]');
    expect(mail.text).not.toContain('<b>');
    expect(mail.text).not.toContain('Numbers are up');

    expect(mail.messageId).toBe(`<${msg.messageId}>`);
    expect(result.providerMessageId).toBe(msg.messageId);
    expect(result.response).toMatch(/^250 /);
    expect(result.accepted?.sort()).toEqual(['ada@example.test', 'audit@example.test', 'cc1@example.test']);

    const byName = Object.fromEntries(mail.attachments.map((a) => [a.filename, a]));
    expect(Object.keys(byName).sort()).toEqual(['chart.png', 'report.pdf']);
    expect(byName['report.pdf']!.contentType).toBe('application/pdf');
    expect(byName['report.pdf']!.content.equals(pdfBytes)).toBe(true);
    expect(byName['chart.png']!.contentType).toBe('image/png');
    expect(byName['chart.png']!.content.equals(pngBytes)).toBe(true);
  });

  it('keeps the same Message-ID when the same delivery is sent again', async () => {
    peer = await startSmtpPeer();
    provider = new SmtpEmailProvider({ url: peer.url });
    const msg = message({ previewText: undefined, cc: undefined, bcc: undefined, replyTo: undefined });
    await provider.send(msg);
    await provider.send(msg);
    const got = await peer.waitFor(2);
    expect(got.map((m) => m.parsed.messageId)).toEqual([`<${msg.messageId}>`, `<${msg.messageId}>`]);
    expect(got[0].parsed.html).not.toContain('preheader');
  });

  it('550 on RCPT: permanent, recipient invalid, with the SMTP status', async () => {
    peer = await startSmtpPeer({ reject: { 'ada@example.test': 550 } });
    provider = new SmtpEmailProvider({ url: peer.url });
    const err = await provider.send(message({ cc: undefined, bcc: undefined })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeliveryError);
    const d = err as DeliveryError;
    expect(d.code).toBe('SMTP_RECIPIENT_REJECTED');
    expect(d.retryable).toBe(false);
    expect(d.options).toMatchObject({ recipientInvalid: true, recipient: 'ada@example.test', providerCode: '550 5.1.1' });
    expect(peer.messages).toHaveLength(0);
  });

  it('a rejected Cc does not fail the delivery when the recipient is accepted', async () => {
    peer = await startSmtpPeer({ reject: { 'cc1@example.test': 550 } });
    provider = new SmtpEmailProvider({ url: peer.url });
    const result = await provider.send(message({ bcc: undefined }));
    expect(result.rejected).toEqual(['cc1@example.test']);
    expect((await peer.waitFor(1))[0].envelope.to).toEqual(['ada@example.test']);
  });

  it.each([
    ['cc', { cc: ['cc1@example.test'], bcc: undefined }, 'cc1@example.test'],
    ['bcc', { cc: undefined, bcc: ['audit@example.test'] }, 'audit@example.test'],
  ])('550 on the recipient while a %s is accepted: the same permanent failure as when all are refused', async (_kind, copies, other) => {
    peer = await startSmtpPeer({ reject: { 'ada@example.test': 550 } });
    provider = new SmtpEmailProvider({ url: peer.url });
    const d = (await provider.send(message(copies)).catch((e: unknown) => e)) as DeliveryError;
    expect(d).toBeInstanceOf(DeliveryError);
    expect(d.code).toBe('SMTP_RECIPIENT_REJECTED');
    expect(d.retryable).toBe(false);
    expect(d.options).toMatchObject({ recipientInvalid: true, recipient: 'ada@example.test', providerCode: '550 5.1.1' });
    // The server took it for the copy: the failure says so, without naming who.
    expect(d.message).toMatch(/^The server rejected ada@example\.test: 550 5\.1\.1 .*; it accepted the message for 1 other recipient \(cc\/bcc\)$/);
    expect(d.message).not.toContain(other);
    expect((await peer.waitFor(1))[0].envelope.to).toEqual([other]);
  });

  it('451 on the recipient while a cc is accepted: retryable, not a bad address', async () => {
    peer = await startSmtpPeer({ reject: { 'ada@example.test': 451 } });
    provider = new SmtpEmailProvider({ url: peer.url });
    const d = (await provider.send(message()).catch((e: unknown) => e)) as DeliveryError;
    expect(d).toBeInstanceOf(DeliveryError);
    expect(d.code).toBe('SMTP_RECIPIENT_DEFERRED');
    expect(d.retryable).toBe(true);
    expect(d.options.recipientInvalid).toBeFalsy();
    expect(d.options).toMatchObject({ recipient: 'ada@example.test', providerCode: '451 4.3.0' });
    expect(d.message).toMatch(/^The server deferred ada@example\.test: 451 4\.3\.0 .*; it accepted the message for 2 other recipients \(cc\/bcc\); a retry sends it to them again$/);
    expect((await peer.waitFor(1))[0].envelope.to.sort()).toEqual(['audit@example.test', 'cc1@example.test']);
  });

  it('never reads a cc or bcc entry as a list of recipients (sends accepted before entries were checked)', async () => {
    peer = await startSmtpPeer();
    provider = new SmtpEmailProvider({ url: peer.url });
    await provider.send(message({ cc: ['cc1@example.test, extra1@example.test'], bcc: ['audit@example.test;extra2@example.test'] }));
    const [mail] = await peer.waitFor(1);
    const rcpt = mail.envelope.to;
    expect(rcpt).toContain('ada@example.test');
    expect(rcpt).not.toContain('extra1@example.test');
    expect(rcpt).not.toContain('extra2@example.test');
  });

  it.each([
    ['998 characters without a space (the send schema\'s limit)', 'x'.repeat(998)],
    ['a 3,000-character word of encoded-word specials between words (a rendered template subject has no limit)', `Hi ${'a_b=c?d:e/'.repeat(300)} there`],
    ['long words with non-ASCII and encoded-word look-alikes', `é${'=?utf-8?q?z?='.repeat(100)}${'w'.repeat(1200)}?`],
    ['a word of 997 characters, the longest that folds as it is', `Subject of ${'v'.repeat(997)}`],
  ])('a subject of %s: no header line over 998 octets, and it reads back exactly', async (_name, subject) => {
    peer = await startSmtpPeer();
    provider = new SmtpEmailProvider({ url: peer.url });
    await provider.send(message({ subject }));
    const [got] = await peer.waitFor(1);
    const raw = got.raw.toString('latin1');
    const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
    const longest = Math.max(...raw.split('\r\n').map((line) => line.length));
    expect(longest).toBeLessThanOrEqual(998);
    expect(head).toMatch(/^Subject:/m);
    expect(got.parsed.subject).toBe(subject);
  });

  it('451 on RCPT: retryable, not a bad address', async () => {
    peer = await startSmtpPeer({ reject: { 'ada@example.test': 451 } });
    provider = new SmtpEmailProvider({ url: peer.url });
    const d = (await provider.send(message({ cc: undefined, bcc: undefined })).catch((e: unknown) => e)) as DeliveryError;
    expect(d).toBeInstanceOf(DeliveryError);
    expect(d.retryable).toBe(true);
    expect(d.options.recipientInvalid).toBeFalsy();
    expect(d.options.providerCode).toBe('451 4.3.0');
  });

  it('5xx on DATA: permanent, 4xx on DATA: retryable', async () => {
    peer = await startSmtpPeer({ rejectData: 554 });
    provider = new SmtpEmailProvider({ url: peer.url });
    const permanent = (await provider.send(message()).catch((e: unknown) => e)) as DeliveryError;
    expect(permanent.code).toBe('SMTP_REJECTED');
    expect(permanent.retryable).toBe(false);
    expect(permanent.options.providerCode).toBe('554 5.7.1');
    peer.options.rejectData = 451;
    const later = (await provider.send(message()).catch((e: unknown) => e)) as DeliveryError;
    expect(later.code).toBe('SMTP_TEMPORARY_FAILURE');
    expect(later.retryable).toBe(true);
  });

  it('wrong credentials: SMTP_AUTH_FAILED, retryable (the server setting, not the message, is wrong)', async () => {
    peer = await startSmtpPeer({ auth: { user: 'mailer', pass: 'right' } });
    provider = new SmtpEmailProvider({ url: `smtp://mailer:wrong@127.0.0.1:${peer.port}` });
    const d = (await provider.send(message()).catch((e: unknown) => e)) as DeliveryError;
    expect(d.code).toBe('SMTP_AUTH_FAILED');
    expect(d.retryable).toBe(true);
    expect(peer.messages).toHaveLength(0);
  });

  it('server down: retryable connection failure', async () => {
    peer = await startSmtpPeer();
    const port = peer.port;
    await peer.close();
    provider = new SmtpEmailProvider({ url: `smtp://127.0.0.1:${port}`, connectionTimeoutMs: 2000 });
    const d = (await provider.send(message()).catch((e: unknown) => e)) as DeliveryError;
    expect(d).toBeInstanceOf(DeliveryError);
    expect(d.code).toBe('SMTP_CONNECTION_FAILED');
    expect(d.retryable).toBe(true);
  });

  it('reuses pooled connections across sends', async () => {
    peer = await startSmtpPeer();
    provider = new SmtpEmailProvider({ url: peer.url });
    for (let i = 0; i < 4; i++) await provider.send(message({ messageId: `m${i}@clarion.test` }));
    const got = await peer.waitFor(4);
    expect(new Set(got.map((m) => m.connectionId)).size).toBe(1);
    expect(peer.connections).toBe(1);
  });

  it('attachment failures are DeliveryErrors and nothing is sent', async () => {
    peer = await startSmtpPeer();
    provider = new SmtpEmailProvider({ url: peer.url, allowPrivateNetworks: false });
    const blocked = (await provider.send(message({ attachments: [{ filename: 'a.pdf', url: `${filesBase}/report.pdf` }] })).catch((e: unknown) => e)) as DeliveryError;
    expect(blocked.code).toBe('ATTACHMENT_FETCH_FAILED');
    expect(blocked.retryable).toBe(false);
    expect(blocked.options.providerCode).toBe('ADDRESS_BLOCKED');

    await provider.close();
    provider = new SmtpEmailProvider({ url: peer.url, allowPrivateNetworks: true });
    const missing = (await provider.send(message({ attachments: [{ filename: 'a.pdf', url: `${filesBase}/nope` }] })).catch((e: unknown) => e)) as DeliveryError;
    expect(missing.code).toBe('ATTACHMENT_FETCH_FAILED');
    expect(missing.retryable).toBe(false);
    expect(missing.options.providerCode).toBe('HTTP 404');
    expect(peer.messages).toHaveLength(0);
  });

  it('refuses a user-given SMTP server on a private address when guarded', async () => {
    peer = await startSmtpPeer();
    provider = new SmtpEmailProvider({ url: peer.url, guard: { allowPrivateNetworks: false } });
    const d = (await provider.send(message()).catch((e: unknown) => e)) as DeliveryError;
    expect(d.code).toBe('SMTP_HOST_BLOCKED');
    expect(d.retryable).toBe(false);
    expect(peer.connections).toBe(0);

    await provider.close();
    provider = new SmtpEmailProvider({ url: peer.url, guard: { allowPrivateNetworks: true } });
    await provider.send(message());
    expect(await peer.waitFor(1)).toHaveLength(1);
  });
});

describe('SMTP URLs', () => {
  it('parses credentials, ports and TLS options', () => {
    expect(parseSmtpUrl('smtp://user%40x.com:p%3Ass@mail.example.com:2525?requireTLS=true')).toEqual({
      host: 'mail.example.com',
      port: 2525,
      secure: false,
      user: 'user@x.com',
      pass: 'p:ss',
      requireTLS: true,
    });
    expect(parseSmtpUrl('smtps://mail.example.com')).toMatchObject({ port: 465, secure: true });
    expect(parseSmtpUrl('smtp://mail.example.com')).toMatchObject({ port: 587, secure: false });
  });

  it('rejects other schemes and unknown options', () => {
    expect(() => parseSmtpUrl('http://mail.example.com')).toThrow(/smtp:\/\//);
    expect(() => parseSmtpUrl('smtp://mail.example.com?host=10.0.0.1')).toThrow(/Unsupported/);
    expect(() => parseSmtpUrl('nonsense')).toThrow();
  });

  it('masks the password', () => {
    expect(maskSmtpUrl('smtp://user:secret@mail.example.com:587')).toBe('smtp://user:****@mail.example.com:587');
  });
});

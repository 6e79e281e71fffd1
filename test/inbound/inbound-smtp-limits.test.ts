// The inbound SMTP server's limits, over a bare SMTP dialogue on loopback: a message mailparser
// cannot read whole (too many MIME parts, a header section too large) is refused for good with
// 550 5.6.0 and the session goes on; a parse that never settles is given up at its deadline; an
// idle session is given the 5 minutes of RFC 5321 4.5.3.2.7.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { InboundSmtpServer } from '../../src/modules/addresses/inbound-smtp.js';
import { INBOUND_PARSE_LIMITS } from '../../src/modules/addresses/inbound.service.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { smtpDialogue } from './smtp-dialogue.js';

const DOMAIN = 'in.clarion.test';
const MAX_BYTES = 4 * 1024 * 1024;
const TO = `support@${DOMAIN}`;

/** A multipart message of `count` attachments: past mailsplit's 1,000 nodes mailparser never settles on it. */
function manyAttachments(count: number): string {
  const parts = Array.from({ length: count }, (_, i) => `--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename="f${i}.bin"\r\n\r\nAAAA\r\n`);
  return `From: x@example.com\r\nTo: ${TO}\r\nSubject: parts\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n${parts.join('')}--b--\r\n`;
}

/** One message after the greeting and EHLO; answers [DATA's, the message's, NOOP's]. */
async function sendThenNoop(port: number, message: string): Promise<string[]> {
  const answers = await smtpDialogue(port, ['EHLO client.example', 'MAIL FROM:<x@example.com>', `RCPT TO:<${TO}>`, 'DATA', `${message}\r\n.`, 'NOOP', 'QUIT']);
  return answers.slice(4, 7);
}

describe.each(STORAGE_KINDS)('inbound SMTP limits (%s)', (kind) => {
  let t: TestContext;
  let smtp: InboundSmtpServer;
  const inboundCount = async () => Number(((await t.deps.db.selectFrom('inbound_emails' as never).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()) as { n: number | string }).n);

  beforeAll(async () => {
    t = await createTestContext(kind, { config: { inboundDomain: DOMAIN, inboundMaxBytes: MAX_BYTES } });
    smtp = await new InboundSmtpServer(t.services.inbound, t.deps.logger, { port: 0, host: '127.0.0.1', maxBytes: MAX_BYTES }).listen();
    expect((await t.app.inject({ method: 'POST', url: '/addresses', headers: t.auth, payload: { prefix: 'support' } })).statusCode).toBe(200);
  });
  afterAll(async () => {
    await smtp.close();
    await t.close();
  });

  it(`accepts ${INBOUND_PARSE_LIMITS.maxParts} MIME parts and refuses more with 550 5.6.0 at once, the session going on`, async () => {
    const before = await inboundCount();
    const [data, atLimit] = await sendThenNoop(smtp.port, manyAttachments(INBOUND_PARSE_LIMITS.maxParts));
    expect(data).toMatch(/^354 /);
    expect(atLimit).toMatch(/^250 /);
    const newest = (await t.app.inject({ method: 'GET', url: '/inbound-emails?limit=1', headers: t.auth })).json().emails[0];
    expect(newest.fields.email_inbound_attachment_count).toBe(INBOUND_PARSE_LIMITS.maxParts);

    // Past mailsplit's limit too (1,000 nodes): the message the parse never settled on.
    for (const count of [INBOUND_PARSE_LIMITS.maxParts + 1, 1000, 5000]) {
      const [, refused, noop] = await sendThenNoop(smtp.port, manyAttachments(count));
      expect(refused).toBe(`550 5.6.0 Message over the parsing limits: more than ${INBOUND_PARSE_LIMITS.maxParts} MIME parts`);
      expect(noop).toMatch(/^250 /);
    }
    expect(await inboundCount()).toBe(before + 1);
  });

  it('refuses a header section over 512 KiB with 550 5.6.0 (mailparser reads none of it), the session going on', async () => {
    const before = await inboundCount();
    const padding = `X-Padding: ${'a'.repeat(978)}\r\n`.repeat(1100);
    const messages = {
      'a header section of 1,100 lines of 990 bytes': `From: x@example.com\r\nTo: ${TO}\r\n${padding}Subject: big\r\n\r\nbody\r\n`,
      'one header line of 2 MB': `From: x@example.com\r\nTo: ${TO}\r\nX-Long: ${'a'.repeat(2_000_000)}\r\nSubject: big\r\n\r\nbody\r\n`,
      // mailparser drops the rest of the message there: the part and all after it.
      "a part's header section of 1,100 lines": `From: x@example.com\r\nTo: ${TO}\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nfirst\r\n--b\r\nContent-Type: text/plain\r\n${padding}\r\nsecond\r\n--b--\r\n`,
    };
    for (const [what, message] of Object.entries(messages)) {
      const [, refused, noop] = await sendThenNoop(smtp.port, message);
      expect(refused, what).toBe('550 5.6.0 Message over the parsing limits: a header section over 524288 bytes');
      expect(noop, what).toMatch(/^250 /);
    }
    expect(await inboundCount()).toBe(before);
  });

  it('gives up a parse that never settles at its deadline: 550 5.6.0, the session going on', async () => {
    // Limits that let through the message mailparser never settles on, as a boundary the count
    // cannot read would.
    const lenient = await new InboundSmtpServer(t.services.inbound, t.deps.logger, {
      port: 0,
      host: '127.0.0.1',
      maxBytes: MAX_BYTES,
      parseLimits: { ...INBOUND_PARSE_LIMITS, maxParts: 10_000, parseDeadlineMs: 50 },
    }).listen();
    try {
      const before = await inboundCount();
      const [, refused, noop] = await sendThenNoop(lenient.port, manyAttachments(1000));
      expect(refused).toBe('550 5.6.0 Message over the parsing limits: not parsed within 0.05 s');
      expect(noop).toMatch(/^250 /);
      expect(await inboundCount()).toBe(before);
    } finally {
      await lenient.close();
    }
  });

  it('records a message whose References name more ids than one database query takes, instead of 451 for ever', async () => {
    // 66,000 distinct ids in 462 KB: past SQLite's 32,766 values in a query and PostgreSQL's 65,535.
    const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
    const id = (i: number) => `<${alphabet[i % 62]}${alphabet[Math.floor(i / 62) % 62]}@${alphabet[Math.floor(i / 3844) % 62]}>`;
    const references = Array.from({ length: 66_000 }, (_, i) => id(i)).join(' ');
    const before = await inboundCount();
    const [, answer] = await sendThenNoop(smtp.port, `From: x@example.com\r\nTo: ${TO}\r\nSubject: Re: long thread\r\nReferences: ${references}\r\n\r\nbody\r\n`);
    expect(answer).toMatch(/^250 /);
    expect(await inboundCount()).toBe(before + 1);
    const newest = (await t.app.inject({ method: 'GET', url: '/inbound-emails?limit=1', headers: t.auth })).json().emails[0];
    expect(newest.fields).toMatchObject({ email_inbound_references: references, email_inbound_resolution_type: 'none' });
  });

  it('waits 5 minutes for the next command (RFC 5321 4.5.3.2.7): the idle timeout smtp-server arms on the session', async () => {
    const armed: number[] = [];
    const { setTimeout } = net.Socket.prototype as { setTimeout: (this: net.Socket, ms: number, callback?: () => void) => net.Socket };
    // The server's end of the session: its local port is the server's.
    const spy = vi.spyOn(net.Socket.prototype, 'setTimeout').mockImplementation(function (this: net.Socket, ms: number, callback?: () => void) {
      if (this.localPort === smtp.port) armed.push(ms);
      return setTimeout.call(this, ms, callback);
    });
    try {
      expect(await smtpDialogue(smtp.port, ['EHLO client.example', 'QUIT'])).toHaveLength(3);
    } finally {
      spy.mockRestore();
    }
    // 0: the timeout cleared (the socket passed from the listener to the session).
    expect([...new Set(armed.filter((ms) => ms > 0))]).toEqual([5 * 60_000]);
  });
});

// The inbound SMTP server's limits, over a bare SMTP dialogue on loopback: a message mailparser
// cannot read whole (too many MIME parts, a header section too large) is refused for good with
// 550 5.6.0 and the session goes on; a parse that never settles is given up at its deadline; an
// idle session is given the 5 minutes of RFC 5321 4.5.3.2.7; a sender that trickles its message,
// or keeps its session going, past the DATA or session limit gets 421 4.4.2 and is closed.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { InboundSmtpServer, type InboundSmtpOptions } from '../../src/modules/addresses/inbound-smtp.js';
import { INBOUND_PARSE_LIMITS, type InboundMailService } from '../../src/modules/addresses/inbound.service.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
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

const REPLY = /^(?:\d{3}-[^\r\n]*\r\n)*\d{3} [^\r\n]*\r\n/;

/**
 * A raw SMTP client that can write without waiting for answers (smtpDialogue waits for each): every
 * reply is kept in `replies`, multi-line ones whole; `closed` tells when the server let it go.
 */
function rawClient(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  const replies: string[] = [];
  let buffer = '';
  let closed = false;
  socket.on('data', (chunk) => {
    buffer += chunk.toString('utf8');
    // A reply ends with a line whose code is followed by a space.
    for (let m = REPLY.exec(buffer); m; m = REPLY.exec(buffer)) {
      replies.push(m[0].trim());
      buffer = buffer.slice(m[0].length);
    }
  });
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  const reply = (n: number, what: string) => eventually(() => replies[n], 10_000, what);
  return {
    replies,
    /** The greeting, then each line and its answer. */
    async dialogue(lines: string[]): Promise<string[]> {
      await reply(0, 'the greeting');
      for (const line of lines) {
        const n = replies.length;
        socket.write(`${line}\r\n`);
        await reply(n, `the answer to ${line}`);
      }
      return replies.slice(1);
    },
    write: (text: string) => !socket.destroyed && socket.writable && socket.write(text),
    /** Waits, well past any limit under test, for the server to close the connection. */
    closed: () => eventually(() => closed, 10_000, 'the server to close the connection'),
    destroy: () => socket.destroy(),
  };
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

  /** A server of this suite's with `options` (small limits), closed after `run`. */
  async function withServer(options: Partial<InboundSmtpOptions>, run: (port: number) => Promise<void>, inbound: InboundMailService = t.services.inbound) {
    const server = await new InboundSmtpServer(inbound, t.deps.logger, { port: 0, host: '127.0.0.1', maxBytes: MAX_BYTES, ...options }).listen();
    try {
      await run(server.port);
    } finally {
      await server.close();
    }
  }
  const envelope = ['EHLO client.example', 'MAIL FROM:<x@example.com>', `RCPT TO:<${TO}>`, 'DATA'];

  it('closes with 421 4.4.2 a DATA phase longer than its limit, though a byte arrives every 50 ms, and keeps nothing of the message', async () => {
    const before = await inboundCount();
    await withServer({ maxDataPhaseMs: 400 }, async (port) => {
      const client = rawClient(port);
      let trickle: NodeJS.Timeout | undefined;
      try {
        expect((await client.dialogue(envelope)).at(-1)).toMatch(/^354 /);
        // A whole message but for its final dot, which never comes: only the limit ends this.
        client.write(`From: x@example.com\r\nTo: ${TO}\r\nSubject: slow\r\n\r\n`);
        trickle = setInterval(() => client.write('a'), 50);
        await client.closed();
        expect(client.replies.at(-1)).toBe('421 4.4.2 Message not received within 0.4 s, closing connection');
      } finally {
        clearInterval(trickle);
        client.destroy();
      }
    });
    expect(await inboundCount()).toBe(before);
  });

  it('closes with 421 4.4.2 a session longer than its limit, though it sends NOOP and RSET every 50 ms', async () => {
    await withServer({ maxSessionMs: 500 }, async (port) => {
      const client = rawClient(port);
      let trickle: NodeJS.Timeout | undefined;
      try {
        expect(await client.dialogue(['EHLO client.example'])).toHaveLength(1);
        let i = 0;
        trickle = setInterval(() => client.write(i++ % 2 ? 'RSET\r\n' : 'NOOP\r\n'), 50);
        await client.closed();
        const answers = client.replies.slice(2);
        expect(answers.at(-1)).toBe('421 4.4.2 Session longer than 0.5 s, closing connection');
        // Every command before it was answered: the session was busy, never idle.
        expect(answers.length).toBeGreaterThan(1);
        for (const answer of answers.slice(0, -1)) expect(answer).toMatch(/^250 /);
      } finally {
        clearInterval(trickle);
        client.destroy();
      }
    });
  });

  it('lets a message being stored when the session limit passes have its 250 first, then closes with 421 4.4.2', async () => {
    // The session timer is fired by hand while the message is stored (the test's own clock):
    // its real deadline, an hour away, never comes.
    const sessionMs = 3_600_000 + 7;
    const expiries: (() => void)[] = [];
    const realSetTimeout = globalThis.setTimeout;
    const spy = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((callback: () => void, ms?: number) => {
      if (ms === sessionMs) expiries.push(callback);
      return realSetTimeout(callback, ms);
    }) as typeof setTimeout);
    const inbound = t.services.inbound;
    const storing = Object.assign(Object.create(inbound) as InboundMailService, {
      receive: (...args: Parameters<InboundMailService['receive']>) => {
        expect(expiries).toHaveLength(1);
        expiries[0]();
        return inbound.receive(...args);
      },
    });
    const before = await inboundCount();
    try {
      await withServer(
        { maxSessionMs: sessionMs },
        async (port) => {
          const client = rawClient(port);
          try {
            await client.dialogue([...envelope, `From: x@example.com\r\nTo: ${TO}\r\nSubject: stored\r\n\r\nbody\r\n.`]);
            await client.closed();
            expect(client.replies.slice(-2)).toEqual([expect.stringMatching(/^250 /), '421 4.4.2 Session longer than 3600.007 s, closing connection']);
          } finally {
            client.destroy();
          }
        },
        storing,
      );
    } finally {
      spy.mockRestore();
    }
    expect(await inboundCount()).toBe(before + 1);
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

// Inbound email over a real SMTP conversation on loopback (nodemailer as the sending MTA): a reply
// to a sent email is linked to its trackingId and its log fields are set; EMAIL_INBOUND reaches a
// webhook endpoint signed; new mail is recorded too; unknown recipients are refused at RCPT,
// oversized mail at SIZE and after DATA, malformed mail after DATA; environments stay apart.
import nodemailer, { type Transporter } from 'nodemailer';
import { verify as pingramVerify } from 'pingram/webhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InboundSmtpServer } from '../../src/modules/addresses/inbound-smtp.js';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { smtpDialogue } from './smtp-dialogue.js';

const DOMAIN = 'in.clarion.test';
const MAX_BYTES = 64 * 1024;

describe.each(STORAGE_KINDS)('inbound email over SMTP (%s)', (kind) => {
  let t: TestContext;
  let smtp: InboundSmtpServer;
  let receiver: WebhookReceiver;
  let secret: string;
  let mta: Transporter;
  const call = (method: 'GET' | 'POST', url: string, payload?: object, headers: Record<string, string> = t.auth) =>
    t.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  const log = async (trackingId: string) => (await call('GET', `/logs/${trackingId}`)).json().logs?.[0];
  const inboundCount = async () => Number(((await t.deps.db.selectFrom('inbound_emails' as never).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()) as { n: number | string }).n);

  beforeAll(async () => {
    t = await createTestContext(kind, { workers: true, config: { allowPrivateNetworks: true, webhookPollMs: 20, inboundDomain: DOMAIN, inboundMaxBytes: MAX_BYTES } });
    smtp = await new InboundSmtpServer(t.services.inbound, t.deps.logger, { port: 0, host: '127.0.0.1', maxBytes: MAX_BYTES }).listen();
    receiver = await new WebhookReceiver().start();
    const endpoint = await call('POST', '/webhooks', { webhook: receiver.url, events: ['EMAIL_INBOUND'] });
    secret = endpoint.json().secret;
    expect((await call('POST', '/addresses', { prefix: 'support' })).statusCode).toBe(200);
    mta = nodemailer.createTransport({ host: '127.0.0.1', port: smtp.port, secure: false, ignoreTLS: true });
  });
  afterAll(async () => {
    mta.close();
    await smtp.close();
    await receiver.close();
    await t.close();
  });
  /** The EMAIL_INBOUND delivery of one inbound record. */
  const deliveryOf = (inboundId: string) =>
    eventually(() => receiver.requests.find((r) => (JSON.parse(r.body) as { details: { email_inbound_id?: string } }).details.email_inbound_id === inboundId), 10_000, `EMAIL_INBOUND ${inboundId}`);

  it('links a reply to the email it answers: log fields, inbound record and a signed EMAIL_INBOUND', async () => {
    const sent = await call('POST', '/send', { type: 'order_shipped', to: { id: 'ada', email: 'ada@example.com' }, email: { subject: 'Your order', html: '<p>Shipped</p>' } });
    expect(sent.statusCode).toBe(200);
    const { trackingId } = sent.json();
    const outbound = await eventually(async () => (await log(trackingId))?.email_sent_message_id as string | undefined, 15_000, 'email_sent_message_id');
    expect(outbound).toMatch(/^<.+@clarion>$/);

    const info = await mta.sendMail({
      from: 'Ada Lovelace <ada@example.com>',
      to: `SUPPORT@${DOMAIN}`,
      cc: 'boss@example.com',
      replyTo: 'ada+replies@example.com',
      subject: 'Re: Your order',
      text: 'Thanks!\n',
      html: '<p>Thanks!</p>',
      inReplyTo: outbound,
      references: ['<older@example.com>', outbound],
      messageId: '<reply-1@example.com>',
      attachments: [{ filename: 'invoice.pdf', content: Buffer.alloc(1500, 1), contentType: 'application/pdf' }],
    });
    // Recipients match whatever their case.
    expect(info.accepted).toEqual([`SUPPORT@${DOMAIN}`]);

    const record = await log(trackingId);
    expect(record).toMatchObject({
      email_inbound_from: 'ada@example.com',
      email_inbound_from_name: 'Ada Lovelace',
      email_inbound_to: `SUPPORT@${DOMAIN}`,
      email_inbound_cc: 'boss@example.com',
      email_inbound_reply_to: 'ada+replies@example.com',
      email_inbound_inbox: `support@${DOMAIN}`,
      email_inbound_subject: 'Re: Your order',
      email_inbound_body_text: 'Thanks!\n',
      email_inbound_body_html: '<p>Thanks!</p>',
      email_inbound_has_attachments: true,
      email_inbound_attachment_count: 1,
      email_inbound_attachments: [{ filename: 'invoice.pdf', contentType: 'application/pdf', size: 1500 }],
      email_inbound_message_id: '<reply-1@example.com>',
      email_inbound_in_reply_to: outbound,
      email_inbound_references: `<older@example.com> ${outbound}`,
      email_inbound_resolution_type: 'in_reply_to',
    });
    expect(typeof record.email_inbound_at).toBe('string');
    // The outbound fields are still there.
    expect(record.email_sent_message_id).toBe(outbound);

    const listed = (await call('GET', `/inbound-emails?trackingId=${trackingId}`)).json();
    expect(listed.emails).toHaveLength(1);
    expect(listed.emails[0]).toMatchObject({ id: record.email_inbound_id, address: `support@${DOMAIN}`, trackingId });
    expect((await call('GET', `/inbound-emails/${record.email_inbound_id}`)).json().fields.email_inbound_subject).toBe('Re: Your order');

    const req = await deliveryOf(record.email_inbound_id);
    const h = req.headers as Record<string, string>;
    const event = pingramVerify({ payload: req.body, headers: { id: h['x-service-id'], timestamp: h['x-service-timestamp'], signature: h['x-service-signature'] }, secret }) as unknown as Record<string, unknown>;
    expect(event).toMatchObject({
      eventType: 'EMAIL_INBOUND',
      channel: 'EMAIL',
      userId: 'ada',
      notificationId: 'order_shipped',
      trackingId,
      details: { email_inbound_id: record.email_inbound_id, email_inbound_from: 'ada@example.com', email_inbound_in_reply_to: outbound, email_inbound_body_text: 'Thanks!\n' },
    });
  });

  it('links through References when In-Reply-To names something else', async () => {
    const { trackingId } = (await call('POST', '/send', { type: 'digest', to: { id: 'bob', email: 'bob@example.com' }, email: { subject: 'Digest', html: '<p>News</p>' } })).json();
    const outbound = await eventually(async () => (await log(trackingId))?.email_sent_message_id as string | undefined, 15_000, 'email_sent_message_id');
    await mta.sendMail({ from: 'bob@example.com', to: `support@${DOMAIN}`, subject: 'Re: Re: Digest', text: 'more', inReplyTo: '<someone-else@example.com>', references: [outbound, '<someone-else@example.com>'] });
    expect(await log(trackingId)).toMatchObject({ email_inbound_from: 'bob@example.com', email_inbound_resolution_type: 'references', email_inbound_has_attachments: false, email_inbound_attachment_count: 0 });
  });

  it('links through any msg-id of In-Reply-To and References, comments and folding between them (RFC 5322 3.6.4), and keeps the ids alone', async () => {
    const { trackingId } = (await call('POST', '/send', { type: 'thread', to: { id: 'dee', email: 'dee@example.com' }, email: { subject: 'Thread', html: '<p>t</p>' } })).json();
    const outbound = await eventually(async () => (await log(trackingId))?.email_sent_message_id as string | undefined, 15_000, 'email_sent_message_id');
    const cases: [headers: string, fields: Record<string, string>][] = [
      [`In-Reply-To: <foo@example.net> ${outbound}`, { email_inbound_in_reply_to: `<foo@example.net> ${outbound}`, email_inbound_resolution_type: 'in_reply_to' }],
      [`In-Reply-To: ${outbound} (message from Clarion)`, { email_inbound_in_reply_to: outbound, email_inbound_resolution_type: 'in_reply_to' }],
      // An id in a comment is no id; folding between ids is whitespace.
      [`In-Reply-To: (not <foo@example.net>)\r\n  <bar@example.net>\r\n ${outbound}`, { email_inbound_in_reply_to: `<bar@example.net> ${outbound}`, email_inbound_resolution_type: 'in_reply_to' }],
      [
        `In-Reply-To: <other@example.net>\r\nReferences: <first@example.net> (the first) ${outbound} (Clarion's)`,
        { email_inbound_in_reply_to: '<other@example.net>', email_inbound_references: `<first@example.net> ${outbound}`, email_inbound_resolution_type: 'references' },
      ],
    ];
    for (const [i, [headers, fields]] of cases.entries()) {
      const raw = `From: dee@example.com\r\nTo: support@${DOMAIN}\r\nSubject: Re: Thread\r\nMessage-ID: <thread-${i}@example.com>\r\n${headers}\r\n\r\nthanks\r\n`;
      expect((await mta.sendMail({ envelope: { from: 'dee@example.com', to: [`support@${DOMAIN}`] }, raw })).response).toMatch(/^250 /);
      // The log holds the latest reply to the message.
      expect(await log(trackingId), headers).toMatchObject({ email_inbound_message_id: `<thread-${i}@example.com>`, ...fields });
    }
  });

  it('records new mail that replies to nothing, queryable with GET /inbound-emails, and emits it without a trackingId', async () => {
    await mta.sendMail({ from: 'Grace <grace@example.com>', to: `support@${DOMAIN}`, subject: 'Hello', text: 'A question', inReplyTo: '<unknown@clarion>' });
    const { emails } = (await call('GET', `/inbound-emails?address=support@${DOMAIN}&limit=1`)).json();
    expect(emails[0]).toMatchObject({ address: `support@${DOMAIN}`, fields: { email_inbound_from: 'grace@example.com', email_inbound_from_name: 'Grace', email_inbound_subject: 'Hello', email_inbound_resolution_type: 'none' } });
    expect(emails[0]).not.toHaveProperty('trackingId');
    const req = await deliveryOf(emails[0].id);
    expect(JSON.parse(req.body)).toMatchObject({ eventType: 'EMAIL_INBOUND', trackingId: '', userId: '', details: { email_inbound_subject: 'Hello', email_inbound_id: emails[0].id } });

    // Paging: newest first, the cursor is the last id of a page.
    const first = (await call('GET', '/inbound-emails?limit=1')).json();
    expect(first.nextCursor).toBe(emails[0].id);
    const second = (await call('GET', `/inbound-emails?limit=1&cursor=${first.nextCursor}`)).json();
    expect(second.emails[0].id).not.toBe(emails[0].id);
  });

  it('stores a reply whose headers and text hold a NUL character, with U+FFFD in its place (PostgreSQL cannot store NUL)', async () => {
    const { trackingId } = (await call('POST', '/send', { type: 'nul', to: { id: 'nul', email: 'nul@example.com' }, email: { subject: 'Nul', html: '<p>n</p>' } })).json();
    const outbound = await eventually(async () => (await log(trackingId))?.email_sent_message_id as string | undefined, 15_000, 'email_sent_message_id');
    const raw = [
      'From: nul@example.com',
      `To: support@${DOMAIN}`,
      'Subject: Re: N\0ul',
      'Message-ID: <nul\0id@example.com>',
      `In-Reply-To: ${outbound}`,
      `References: <older\0ref@example.com> ${outbound}`,
      '',
      'body with a \0 in it',
      '',
    ].join('\r\n');
    const info = await mta.sendMail({ envelope: { from: 'nul@example.com', to: [`support@${DOMAIN}`] }, raw });
    expect(info.response).toMatch(/^250 /);
    expect(await log(trackingId)).toMatchObject({
      email_inbound_subject: 'Re: N\uFFFDul',
      email_inbound_message_id: '<nul\uFFFDid@example.com>',
      email_inbound_references: `<older\uFFFDref@example.com> ${outbound}`,
      email_inbound_body_text: expect.stringContaining('with a \uFFFD in it'),
      email_inbound_resolution_type: 'in_reply_to',
    });
  });

  it('refuses unknown recipients at RCPT with 550', async () => {
    const before = await inboundCount();
    const err = await mta.sendMail({ from: 'x@example.com', to: `nobody@${DOMAIN}`, subject: 's', text: 't' }).then(() => null, (e: Error & { responseCode?: number; response?: string }) => e);
    expect(err?.responseCode).toBe(550);
    expect(err?.response).toMatch(/550 5\.1\.1 <nobody@in\.clarion\.test>: no such address here/);
    // One known and one unknown recipient: the known one gets it.
    const info = await mta.sendMail({ from: 'x@example.com', to: [`support@${DOMAIN}`, 'stranger@elsewhere.example'], subject: 'both', text: 't' });
    expect(info.accepted).toEqual([`support@${DOMAIN}`]);
    expect(info.rejected).toEqual(['stranger@elsewhere.example']);
    expect(await inboundCount()).toBe(before + 1);
  });

  it('refuses oversized mail with 552: at MAIL FROM when SIZE is declared, after DATA otherwise', async () => {
    const before = await inboundCount();
    const answers = await smtpDialogue(smtp.port, ['EHLO client.example', `MAIL FROM:<x@example.com> SIZE=${MAX_BYTES + 1}`, 'QUIT']);
    expect(answers[1]).toMatch(new RegExp(`250[- ]SIZE ${MAX_BYTES}`));
    expect(answers[2]).toMatch(/^552 /);

    const raw = `From: x@example.com\r\nTo: support@${DOMAIN}\r\nSubject: big\r\n\r\n${'a'.repeat(76)}\r\n`.repeat(Math.ceil(MAX_BYTES / 80) + 10);
    const err = await mta.sendMail({ envelope: { from: 'x@example.com', to: [`support@${DOMAIN}`] }, raw }).then(() => null, (e: Error & { responseCode?: number }) => e);
    expect(err?.responseCode).toBe(552);
    expect(await inboundCount()).toBe(before);
  });

  it('refuses malformed mail (no header section, no From) with 550 5.6.0', async () => {
    const before = await inboundCount();
    for (const raw of ['just some text without any header\r\n\r\nbody\r\n', `To: support@${DOMAIN}\r\nSubject: who am I\r\n\r\nbody\r\n`]) {
      const err = await mta.sendMail({ envelope: { from: 'x@example.com', to: [`support@${DOMAIN}`] }, raw }).then(() => null, (e: Error & { responseCode?: number; response?: string }) => e);
      expect(err?.responseCode).toBe(550);
      expect(err?.response).toMatch(/5\.6\.0 Malformed message/);
    }
    expect(await inboundCount()).toBe(before);
  });

  it("keeps inbound mail inside the address's environment and never links to another account's email", async () => {
    const { trackingId } = (await call('POST', '/send', { type: 'note', to: { id: 'cy', email: 'cy@example.com' }, email: { subject: 'Note', html: '<p>n</p>' } })).json();
    const outbound = await eventually(async () => (await log(trackingId))?.email_sent_message_id as string | undefined, 15_000, 'email_sent_message_id');
    const other = await t.newAccount();
    const otherAuth = { authorization: `Bearer ${other.apiKey}` };
    expect((await call('POST', '/addresses', { prefix: 'elsewhere' }, otherAuth)).statusCode).toBe(200);
    // A reply to the first account's email sent to the other account's address.
    await mta.sendMail({ from: 'cy@example.com', to: `elsewhere@${DOMAIN}`, subject: 'Re: Note', text: 'hi', inReplyTo: outbound });
    const theirs = (await call('GET', '/inbound-emails', undefined, otherAuth)).json().emails;
    expect(theirs).toHaveLength(1);
    expect(theirs[0]).not.toHaveProperty('trackingId');
    expect(theirs[0].fields.email_inbound_resolution_type).toBe('none');
    expect((await log(trackingId)).email_inbound_from).toBeUndefined();
    const ours = (await call('GET', '/inbound-emails?limit=200')).json().emails;
    expect(ours.some((e: { id: string }) => e.id === theirs[0].id)).toBe(false);
    expect((await call('GET', `/inbound-emails/${ours[0].id}`, undefined, otherAuth)).statusCode).toBe(404);
  });
});

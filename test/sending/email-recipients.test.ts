import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

describe.each(STORAGE_KINDS)('send: cc and bcc are one address each, 50 recipients at most (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  const send = (email: object, subject = 'hello') =>
    t.app.inject({
      method: 'POST',
      url: '/send',
      headers: t.auth,
      payload: { type: 'cc_check', to: { id: 'ada', email: 'ada@example.com' }, email: { subject, html: '<p>hi</p>' }, options: { email } },
    });

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
  });
  afterAll(async () => {
    await t.close();
    await smtp.close();
  });
  beforeEach(() => {
    smtp.messages.length = 0;
  });

  it.each([
    ['a comma-separated list in cc', { ccAddresses: ['ok@example.com', 'a@example.com, b@example.com'] }, 'ccAddresses[1]'],
    ['a semicolon-separated list in bcc', { bccAddresses: ['a@example.com;b@example.com'] }, 'bccAddresses[0]'],
    ['a display name in cc', { ccAddresses: ['Bob <bob@example.com>'] }, 'ccAddresses[0]'],
    ['a group in bcc', { bccAddresses: ['team: a@example.com, b@example.com;'] }, 'bccAddresses[0]'],
    ['no address at all', { ccAddresses: ['not an address'] }, 'ccAddresses[0]'],
    ['a list in reply-to', { replyToAddresses: ['a@example.com, b@example.com'] }, 'replyToAddresses[0]'],
  ])('refuses %s with 400 VALIDATION_FAILED naming the entry', async (_name, email, entry) => {
    const res = await send(email);
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.error.code).toBe('VALIDATION_FAILED');
    expect(body.error.message).toContain(`options.email.${entry}`);
    expect(body.error.fix).toBeTruthy();
    expect(body.trackingId).toBeTruthy();
  });

  it('refuses more than 50 recipients (the user + cc + bcc)', async () => {
    const cc = Array.from({ length: 25 }, (_, i) => `cc${i}@example.com`);
    const bcc = Array.from({ length: 25 }, (_, i) => `bcc${i}@example.com`);
    const res = await send({ ccAddresses: cc, bccAddresses: bcc });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(res.json().error.message).toMatch(/51 recipients.*at most 50/);
  });

  it('delivers to exactly the addresses given: RCPT TO is the user, each cc and each bcc', async () => {
    const cc = Array.from({ length: 24 }, (_, i) => `cc${i}@example.com`);
    const bcc = Array.from({ length: 25 }, (_, i) => `bcc${i}@example.com`);
    const res = await send({ ccAddresses: cc, bccAddresses: bcc }, 'fifty');
    expect(res.statusCode).toBe(200);
    const [mail] = await smtp.waitFor(1);
    expect(mail.envelope.to.sort()).toEqual(['ada@example.com', ...cc, ...bcc].sort());
    expect(mail.parsed.bcc).toBeUndefined();
  });
});

// RFC 5322 §2.1.1: no header line over 998 characters, whatever the subject. A subject at the send
// schema's limit (998 characters) with no space, or a rendered one longer still, used to leave as
// one folded line of a space and the whole word; it now goes as RFC 2047 encoded-words. Checked
// on the raw message a loopback SMTP sink receives, and read back with mailparser.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

describe.each(STORAGE_KINDS)('send: a subject with a word too long to fold (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  const log = async (trackingId: string) => (await t.app.inject({ method: 'GET', url: `/logs/${trackingId}`, headers: t.auth })).json().logs[0] as Record<string, unknown>;

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
  });

  it.each<[string, { subject: string; parameters?: Record<string, string> }, string]>([
    ['998 characters without a space, the schema limit', { subject: 'x'.repeat(998) }, 'x'.repeat(998)],
    ['rendered from a template to 2,000 characters', { subject: 'Re: {{ code }}', parameters: { code: 'Z9_'.repeat(700).slice(0, 2000) } }, `Re: ${'Z9_'.repeat(700).slice(0, 2000)}`],
  ])('%s: every line of the message is at most 998 octets and the subject reads back exactly', async (_name, { subject, parameters }, expected) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/send',
      headers: t.auth,
      payload: { type: 'long_subject', to: { id: 'ls', email: 'ls@example.com' }, email: { subject, html: '<p>hi</p>' }, ...(parameters ? { parameters } : {}) },
    });
    expect(res.statusCode).toBe(200);
    const { trackingId } = res.json<{ trackingId: string }>();
    const record = await eventually(async () => {
      const r = await log(trackingId);
      return r?.email_sent_at || r?.email_failed_at ? r : undefined;
    });
    expect(record.email_sent_at).toBeTruthy();

    const mail = smtp.messages.find((m) => m.parsed.messageId === record.email_sent_message_id);
    expect(mail).toBeDefined();
    const lines = mail!.raw.toString('latin1').split('\r\n');
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(998);
    expect(mail!.parsed.subject).toBe(expected);
  });
});

import { Pingram } from 'pingram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestContext, createTestContext } from '../helpers/context.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';
import { eventually } from '../helpers/wait.js';

/**
 * The pingram SDK's single-channel sends, the log stream and tail, and the parsed components,
 * through the real SDK against the started server: each call's effect is checked where it lands
 * (the SMTP peer, the development carrier, the logs).
 */
describe.each(STORAGE_KINDS)('pingram SDK: email.send, sms.send, sender.testEmail, logs, components (%s)', (kind) => {
  let t: TestContext;
  let smtp: SmtpPeer;
  let client: Pingram;
  let raw: (method: string, url: string) => Promise<Response>;

  beforeAll(async () => {
    smtp = await startSmtpPeer();
    t = await createTestContext(kind, { workers: true, config: { smtpUrl: smtp.url, allowPrivateNetworks: true } });
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    // The development carrier calls back over HTTP.
    t.deps.config.publicUrl = address;
    client = new Pingram({ apiKey: t.account.apiKey, baseUrl: address });
    raw = (method, url) => fetch(`${address}${url}`, { method, headers: t.auth });
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
  });

  const log = async (trackingId: string, field: string) =>
    eventually(async () => {
      const record = (await client.logs.getLogsByTrackingIds(trackingId)).logs[0] as unknown as Record<string, unknown> | undefined;
      return record?.[field] !== undefined ? record : undefined;
    }, 15_000, field);

  it('email.send delivers one email with its copies and reply-to, forced to EMAIL', async () => {
    const sent = await client.email.send({
      type: 'direct_email',
      to: 'ada@example.com',
      subject: 'Receipt',
      html: '<p>Thanks</p>',
      fromName: 'Shop',
      previewText: 'Your receipt',
      replyToAddresses: ['help@example.com'],
      ccAddresses: ['books@example.com'],
    });
    expect(sent.trackingId).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent.messages).toEqual([]);
    const mail = (await smtp.waitFor(1)).find((m) => m.parsed.subject === 'Receipt')!;
    expect(mail.envelope.to.sort()).toEqual(['ada@example.com', 'books@example.com']);
    expect(mail.parsed.replyTo?.text).toBe('help@example.com');
    expect(mail.parsed.from?.value[0]?.name).toBe('Shop');
    const record = await log(sent.trackingId, 'email_sent_at');
    expect(record).toMatchObject({ type: 'direct_email', user_id: 'ada@example.com', user_email: 'ada@example.com', inapp_routing: 'SKIP' });
  });

  it('email.send and sender.testEmail refuse an html past the renderer\'s limit, as POST /send does', async () => {
    const html = 'a'.repeat(2_000_001);
    // Each call starts only when awaited: a second request already in flight would reject with no handler yet.
    for (const call of [
      () => client.email.send({ type: 'direct_big', to: 'big@example.com', subject: 's', html }),
      () => client.sender.testEmail({ notificationId: 'direct_big', to: 'big@example.com', subject: 's', html, fromAddress: t.deps.config.defaultFromAddress, fromName: 'x' }),
    ]) {
      await expect(call()).rejects.toMatchObject({ response: { status: 400 } });
    }
    const refused = await t.app.inject({ method: 'POST', url: '/email', headers: t.auth, payload: { type: 'direct_big', to: 'big@example.com', subject: 's', html } });
    expect(refused.json().error).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringContaining('html must NOT have more than 2000000 characters') });
  });

  it('sender.testEmail sends the given content from the given sender', async () => {
    const sent = await client.sender.testEmail({
      notificationId: 'direct_test',
      to: 'grace@example.com',
      subject: 'Test of the welcome email',
      html: '<p>Preview</p>',
      fromAddress: t.deps.config.defaultFromAddress,
      fromName: 'Clarion test',
    });
    const mail = (await smtp.waitFor(2)).find((m) => m.parsed.subject === 'Test of the welcome email')!;
    expect(mail.parsed.subject).toBe('Test of the welcome email');
    expect(mail.envelope.to).toEqual(['grace@example.com']);
    expect(mail.parsed.from?.value[0]).toMatchObject({ name: 'Clarion test', address: t.deps.config.defaultFromAddress });
    expect((await log(sent.trackingId, 'email_sent_at')).type).toBe('direct_test');
  });

  it('sms.send reaches the development carrier; an sms without message or media is a 400', async () => {
    const sent = await client.sms.send({ type: 'direct_sms', to: '+14155550199', message: 'Your code is 123' });
    const record = await log(sent.trackingId, 'sms_sent_at');
    expect(record).toMatchObject({ user_id: '+14155550199', email_routing: 'SKIP' });
    const carrier = (await (await raw('GET', `/dev-carrier/messages?to=${encodeURIComponent('+14155550199')}`)).json()) as { messages: { body: string }[] };
    expect(carrier.messages.map((m) => m.body)).toEqual(['Your code is 123']);

    await expect(client.sms.send({ type: 'direct_sms', to: '+14155550199' })).rejects.toMatchObject({ response: { status: 400 } });
  });

  it('logs.tailLogs answers the newest log records, newest first; "tail" is no tracking id', async () => {
    const { logs } = await client.logs.tailLogs();
    const types = logs.map((l) => (l as unknown as { type: string }).type);
    expect(types.slice(0, 3)).toEqual(['direct_sms', 'direct_test', 'direct_email']);
    expect(logs.every((l) => typeof l.trackingId === 'string' && l.trackingId !== 'tail')).toBe(true);
  });

  it('logs.getLogs pages the delivery events newest first with a cursor', async () => {
    const first = await client.logs.getLogs(3);
    expect(first.messages).toHaveLength(3);
    expect(first.nextCursor).toEqual(expect.any(String));
    const all: { trackingId: string; eventType: string; epochMs: number }[] = [...first.messages];
    let cursor = first.nextCursor;
    while (cursor) {
      const page = await client.logs.getLogs(3, cursor);
      all.push(...page.messages);
      cursor = page.nextCursor;
    }
    // Newest first, no event twice, and the email sends' sent events among them.
    expect(all.map((e) => e.epochMs)).toEqual([...all.map((e) => e.epochMs)].sort((a, b) => b - a));
    expect(new Set(all.map((e) => `${e.trackingId} ${e.eventType} ${e.epochMs}`)).size).toBe(all.length);
    expect(all.filter((e) => e.eventType === 'EMAIL_SENT')).toHaveLength(2);
    expect(all.some((e) => e.eventType === 'SMS_SENT')).toBe(true);
    await expect(client.logs.getLogs(3, 'not-a-cursor')).rejects.toMatchObject({ response: { status: 400 } });
  });

  it('components.listComponentsParsed answers the components with internal parsed', async () => {
    await client.components.createComponent({ componentId: 'footer', name: 'Footer', html: '<p>footer</p>', internal: JSON.stringify({ blocks: [{ type: 'text' }] }) });
    const parsed = await client.components.listComponentsParsed();
    expect(parsed).toHaveLength(1);
    expect(parsed[0]).toMatchObject({ name: 'Footer', html: '<p>footer</p>', internal: { blocks: [{ type: 'text' }] } });
    // "public" names the list, so it is no component id.
    await expect(client.components.createComponent({ componentId: 'public', name: 'P', html: '<p>p</p>' })).rejects.toMatchObject({ response: { status: 400 } });
  });

  it('account.updateAccount (POST /account) renames the account', async () => {
    const updated = await client.account.updateAccount({ name: 'Renamed account' });
    expect(updated).toMatchObject({ accountId: t.account.accountId, name: 'Renamed account' });
    expect((await client.account.getAccountDetails()).name).toBe('Renamed account');
  });
});

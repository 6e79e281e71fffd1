import { randomBytes } from 'node:crypto';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MailCatcherEmailProvider } from '../../src/channels/email/mail-catcher.js';
import { EmailProviders } from '../../src/channels/email/registry.js';
import type { EmailMessage } from '../../src/channels/types.js';
import type { CreatedAccount } from '../../src/modules/accounts/bootstrap.js';
import { ManualClock, type TestContext, createTestContext, emailStoresOf } from '../helpers/context.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const png = randomBytes(1200);

function message(account: CreatedAccount, n: number, overrides: Partial<EmailMessage> = {}): EmailMessage {
  return {
    from: { name: 'Clarion', address: 'noreply@clarion.test' },
    to: { name: `User ${n}`, address: `user${n}@example.test` },
    cc: ['boss@example.test'],
    bcc: ['audit@example.test'],
    replyTo: ['help@clarion.test'],
    subject: `Hello #${n}`,
    html: `<p>Message <b>${n}</b></p>`,
    previewText: `Preview ${n}`,
    messageId: `msg-${n}-${randomBytes(4).toString('hex')}@clarion.test`,
    attachments: [{ filename: 'dot.png', content: png.toString('base64'), contentType: 'image/png' }],
    meta: { accountId: account.accountId, envId: account.clientId, trackingId: `trk-${n}`, userId: `u${n}` },
    ...overrides,
  };
}

describe.each(STORAGE_KINDS)('mail catcher, GET /outbox (%s)', (kind) => {
  let t: TestContext;
  let providers: EmailProviders;
  const clock = new ManualClock();
  const sent: EmailMessage[] = [];

  beforeAll(async () => {
    t = await createTestContext(kind, { clock });
    providers = new EmailProviders(t.deps, emailStoresOf(t));
    const provider = await providers.forEnvironment(t.account.accountId, t.account.clientId);
    expect(provider).toBeInstanceOf(MailCatcherEmailProvider);
    for (let n = 1; n <= 5; n++) {
      const m = message(t.account, n, n === 3 ? { to: { address: 'Shared@Example.test' } } : {});
      await provider.send(m);
      sent.push(m);
      clock.advance(1000);
    }
  });
  afterAll(async () => {
    await providers?.close();
    await t?.close();
  });

  const get = (url: string, headers = t.auth) => t.app.inject({ method: 'GET', url, headers });

  it('lists newest first, every record marked as not delivered externally', async () => {
    const res = await get('/outbox');
    expect(res.statusCode).toBe(200);
    const { messages, nextCursor } = res.json();
    expect(nextCursor).toBeUndefined();
    expect(messages.map((m: { subject: string }) => m.subject)).toEqual(['Hello #5', 'Hello #4', 'Hello #3', 'Hello #2', 'Hello #1']);
    for (const m of messages) {
      expect(m.deliveredExternally).toBe(false);
      expect(m.note).toMatch(/not delivered/);
      expect(m.html).toBeUndefined();
    }
    expect(messages[4]).toMatchObject({
      trackingId: 'trk-1',
      userId: 'u1',
      messageId: sent[0].messageId,
      from: { name: 'Clarion', address: 'noreply@clarion.test' },
      to: { name: 'User 1', address: 'user1@example.test' },
      cc: ['boss@example.test'],
      bcc: ['audit@example.test'],
      replyTo: ['help@clarion.test'],
      previewText: 'Preview 1',
      attachments: [{ filename: 'dot.png', contentType: 'image/png', size: 1200, source: 'inline' }],
      createdAt: '2026-01-15T10:00:00.000Z',
    });
  });

  it('pages with limit and cursor', async () => {
    const first = (await get('/outbox?limit=2')).json();
    expect(first.messages.map((m: { trackingId: string }) => m.trackingId)).toEqual(['trk-5', 'trk-4']);
    const second = (await get(`/outbox?limit=2&cursor=${first.nextCursor}`)).json();
    expect(second.messages.map((m: { trackingId: string }) => m.trackingId)).toEqual(['trk-3', 'trk-2']);
    const third = (await get(`/outbox?limit=2&cursor=${second.nextCursor}`)).json();
    expect(third.messages.map((m: { trackingId: string }) => m.trackingId)).toEqual(['trk-1']);
    expect(third.nextCursor).toBeUndefined();
    const bad = await get('/outbox?cursor=garbage');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('VALIDATION_FAILED');
    expect((await get('/outbox?limit=0')).statusCode).toBe(400);
  });

  it('filters by recipient (case-insensitive) and by trackingId', async () => {
    const byTo = (await get('/outbox?to=shared@example.TEST')).json().messages;
    expect(byTo.map((m: { trackingId: string }) => m.trackingId)).toEqual(['trk-3']);
    const byTracking = (await get('/outbox?trackingId=trk-2')).json().messages;
    expect(byTracking.map((m: { subject: string }) => m.subject)).toEqual(['Hello #2']);
    expect((await get('/outbox?trackingId=nope')).json().messages).toEqual([]);
  });

  it('returns one message with html, text, headers and, on request, the raw source', async () => {
    const id = (await get('/outbox?trackingId=trk-2')).json().messages[0].id;
    const res = await get(`/outbox/${id}`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.html.startsWith('<div class="preheader"')).toBe(true);
    expect(body.html).toContain('Preview 2');
    expect(body.text).toBe('Message 2');
    expect(body.headers['message-id']).toBe(`<${sent[1].messageId}>`);
    expect(body.headers.subject).toBe('Hello #2');
    expect(body.headers.bcc).toBeUndefined();
    expect(body.rawUrl).toBe(`/outbox/${id}/raw`);
    expect(body.raw).toBeUndefined();
    expect(body.deliveredExternally).toBe(false);
    const withRaw = (await get(`/outbox/${id}?includeRaw=true`)).json();
    expect(withRaw.raw).toContain('Subject: Hello #2');
  });

  it('serves the MIME source as message/rfc822 that parses back into the same message', async () => {
    const id = (await get('/outbox?trackingId=trk-4')).json().messages[0].id;
    const res = await get(`/outbox/${id}/raw`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^message\/rfc822/);
    const parsed = await simpleParser(res.rawPayload);
    expect(parsed.subject).toBe('Hello #4');
    expect(parsed.messageId).toBe(`<${sent[3].messageId}>`);
    expect(parsed.from?.value[0]).toEqual({ name: 'Clarion', address: 'noreply@clarion.test' });
    expect(parsed.text?.trim()).toBe('Message 4');
    expect(parsed.attachments).toHaveLength(1);
    expect(parsed.attachments[0].content.equals(png)).toBe(true);
  });

  it('stores a retried delivery (same Message-ID) once', async () => {
    const provider = providers.mailCatcher;
    const m = message(t.account, 9);
    const a = await provider.send(m);
    const b = await provider.send(m);
    expect(a.providerMessageId).toBe(m.messageId);
    expect(b.response).toBe(a.response);
    expect((await get('/outbox?trackingId=trk-9')).json().messages).toHaveLength(1);
  });

  it('keeps accounts apart and answers 404 for unknown or foreign ids', async () => {
    const other = await t.newAccount();
    const otherAuth = { authorization: `Bearer ${other.apiKey}` };
    await providers.mailCatcher.send(message(other, 42));
    const theirs = (await get('/outbox', otherAuth)).json().messages;
    expect(theirs.map((m: { trackingId: string }) => m.trackingId)).toEqual(['trk-42']);
    const mine = (await get('/outbox')).json().messages;
    expect(mine.map((m: { trackingId: string }) => m.trackingId)).not.toContain('trk-42');

    const foreignId = theirs[0].id;
    for (const url of [`/outbox/${foreignId}`, `/outbox/${foreignId}/raw`, '/outbox/00000000-0000-0000-0000-000000000000']) {
      const res = await get(url);
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('NOT_FOUND');
    }
    expect((await get(`/outbox/${foreignId}`, otherAuth)).statusCode).toBe(200);
  });

  it('requires credentials', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/outbox' })).statusCode).toBe(401);
  });
});

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MailCatcherEmailProvider } from '../../src/channels/email/mail-catcher.js';
import { EmailProviders, createEmailProvider } from '../../src/channels/email/registry.js';
import { SmtpEmailProvider } from '../../src/channels/email/smtp.js';
import type { EmailMessage } from '../../src/channels/types.js';
import type { CreatedAccount } from '../../src/modules/accounts/bootstrap.js';
import { type TestContext, createTestContext, emailStoresOf } from '../helpers/context.js';
import { type SmtpPeer, startSmtpPeer } from '../helpers/smtp-peer.js';
import { STORAGE_KINDS } from '../helpers/storage.js';

const mail = (account: CreatedAccount, n: number): EmailMessage => ({
  from: { address: 'app@clarion.test' },
  to: { address: `to${n}@example.test` },
  subject: `S${n}`,
  html: `<p>${n}</p>`,
  messageId: `settings-${n}-${Date.now()}@clarion.test`,
  meta: { accountId: account.accountId, envId: account.clientId, trackingId: `t${n}` },
});

describe.each(STORAGE_KINDS)('per-environment SMTP setting (%s)', (kind) => {
  let t: TestContext;
  let peer: SmtpPeer;
  let providers: EmailProviders;

  beforeAll(async () => {
    peer = await startSmtpPeer({ auth: { user: 'env-user', pass: 's3cret!' } });
    t = await createTestContext(kind, { config: { allowPrivateNetworks: true } });
  });
  afterEach(async () => {
    await providers?.close();
  });
  afterAll(async () => {
    await t?.close();
    await peer?.close();
  });

  const req = (method: 'GET' | 'PUT' | 'DELETE', payload?: object, headers = t.auth) =>
    t.app.inject({ method, url: '/settings/email/smtp', headers, ...(payload ? { payload } : {}) });

  it('defaults to the local outbox', async () => {
    const res = await req('GET');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ url: null, provider: 'outbox', source: 'default' });
    providers = new EmailProviders(t.deps, emailStoresOf(t));
    expect(await providers.forEnvironment(t.account.accountId, t.account.clientId)).toBeInstanceOf(MailCatcherEmailProvider);
  });

  it('rejects malformed URLs and unknown fields', async () => {
    for (const url of ['http://mail.example.com', 'smtp://', 'smtp://mail.example.com?host=10.0.0.1']) {
      const res = await req('PUT', { url });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    expect((await req('PUT', { url: peer.url, extra: 1 })).statusCode).toBe(400);
  });

  it('verify=true refuses to save a server that does not accept the credentials', async () => {
    const res = await req('PUT', { url: `smtp://env-user:wrong@127.0.0.1:${peer.port}`, verify: true });
    expect(res.statusCode).toBe(502);
    expect(res.json().error.code).toBe('PROVIDER_ERROR');
    expect((await req('GET')).json().source).toBe('default');
  });

  it('stores the URL encrypted, shows it masked, and routes the environment through it', async () => {
    const res = await req('PUT', { url: peer.url, verify: true });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ url: `smtp://env-user:****@127.0.0.1:${peer.port}`, provider: 'smtp', source: 'environment' });
    expect(JSON.stringify(res.json())).not.toContain('s3cret');
    expect((await req('GET')).json().url).toBe(`smtp://env-user:****@127.0.0.1:${peer.port}`);

    const row = await t.deps.db
      .withTables<{ email_settings: { env_id: string; smtp_url_enc: string } }>()
      .selectFrom('email_settings')
      .selectAll()
      .where('env_id', '=', t.account.clientId)
      .executeTakeFirstOrThrow();
    expect(row.smtp_url_enc).not.toContain('s3cret');
    expect(t.deps.secrets.decrypt(row.smtp_url_enc)).toBe(peer.url);

    providers = new EmailProviders(t.deps, emailStoresOf(t));
    const provider = await providers.forEnvironment(t.account.accountId, t.account.clientId);
    expect(provider).toBeInstanceOf(SmtpEmailProvider);
    const before = peer.messages.length;
    const result = await provider.send(mail(t.account, 1));
    expect(result.response).toMatch(/^250/);
    const got = await peer.waitFor(before + 1);
    expect(got[before].user).toBe('env-user');

    // One pooled transport per distinct URL.
    expect(await providers.forEnvironment(t.account.accountId, t.account.clientId)).toBe(provider);
    expect(providers.poolCount).toBe(1);

    // Another account's environment is untouched.
    const other = await t.newAccount();
    expect(await providers.forEnvironment(other.accountId, other.clientId)).toBeInstanceOf(MailCatcherEmailProvider);
    const theirs = await req('GET', undefined, { authorization: `Bearer ${other.apiKey}` });
    expect(theirs.json()).toEqual({ url: null, provider: 'outbox', source: 'default' });
    expect((await req('DELETE', undefined, { authorization: `Bearer ${other.apiKey}` })).statusCode).toBe(404);
  });

  it('DELETE falls back to the server default, a second DELETE is 404', async () => {
    const res = await req('DELETE');
    expect(res.statusCode).toBe(200);
    expect((await req('GET')).json().source).toBe('default');
    providers = new EmailProviders(t.deps, emailStoresOf(t));
    expect(await providers.forEnvironment(t.account.accountId, t.account.clientId)).toBeInstanceOf(MailCatcherEmailProvider);
    const again = await req('DELETE');
    expect(again.statusCode).toBe(404);
    expect(again.json().error.code).toBe('NOT_FOUND');
  });
});

describe('SMTP setting without private networks', () => {
  let t: TestContext;
  beforeAll(async () => {
    t = await createTestContext('sqlite');
  });
  afterAll(() => t?.close());

  it('refuses an SMTP host on a private or loopback address', async () => {
    for (const url of ['smtp://10.1.2.3:25', 'smtp://u:p@127.0.0.1:2525', 'smtp://localhost:25', 'smtps://169.254.169.254']) {
      const res = await t.app.inject({ method: 'PUT', url: '/settings/email/smtp', headers: t.auth, payload: { url } });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.message).toMatch(/loopback, private or link-local/);
    }
  });

  it('reports the server SMTP_URL as the source when one is configured', async () => {
    const peer = await startSmtpPeer();
    const withServer = await createTestContext('sqlite', { config: { smtpUrl: peer.url } });
    try {
      const res = await withServer.app.inject({ method: 'GET', url: '/settings/email/smtp', headers: withServer.auth });
      expect(res.json()).toEqual({ url: null, provider: 'smtp', source: 'server' });
      // The operator's own server is trusted: no guard on it, even on loopback.
      const providers = new EmailProviders(withServer.deps, emailStoresOf(withServer));
      const provider = await providers.forEnvironment(withServer.account.accountId, withServer.account.clientId);
      expect(provider).toBeInstanceOf(SmtpEmailProvider);
      await provider.send(mail(withServer.account, 7));
      expect((await peer.waitFor(1))[0].parsed.subject).toBe('S7');
      await providers.close();

      const single = createEmailProvider(withServer.deps, withServer.services.repositories.mailCatcher);
      expect(single).toBeInstanceOf(SmtpEmailProvider);
      await single.close();
      expect(createEmailProvider(t.deps, t.services.repositories.mailCatcher)).toBeInstanceOf(MailCatcherEmailProvider);
    } finally {
      await withServer.close();
      await peer.close();
    }
  });
});

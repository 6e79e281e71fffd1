import { SmtpEmailProvider, maskSmtpUrl, parseSmtpUrl } from '../../channels/email/smtp.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { SafeFetchError, resolvePublicAddress } from '../../net/ssrf.js';
import type { EnvScope } from '../../storage/env-settings.js';
import type { EmailSettingsRepository } from './email-settings.repository.js';

export interface SmtpSettingView {
  /** The environment's SMTP URL with its password masked; null when the environment has none. */
  url: string | null;
  /** What this environment's mail goes through now. */
  provider: 'smtp' | 'outbox';
  source: 'environment' | 'server' | 'default';
  updatedAt?: string;
}

/**
 * The environment's own SMTP server (PUT /settings/email/smtp), which decides whether its mail
 * is sent or kept by the mail catcher (the provider "outbox").
 */
export class EmailSettingsService {
  constructor(
    private readonly deps: Pick<Deps, 'config' | 'clock' | 'secrets'>,
    private readonly repo: EmailSettingsRepository,
  ) {}

  async getSmtpSetting(scope: EnvScope): Promise<SmtpSettingView> {
    const row = await this.repo.find(scope);
    if (row) {
      return { url: maskSmtpUrl(this.deps.secrets.decrypt(row.smtp_url_enc)), provider: 'smtp', source: 'environment', updatedAt: row.updated_at };
    }
    return this.deps.config.smtpUrl ? { url: null, provider: 'smtp', source: 'server' } : { url: null, provider: 'outbox', source: 'default' };
  }

  /** Stores the environment's SMTP server (encrypted). With `verify`, connects and authenticates first. */
  async putSmtpSetting(scope: EnvScope, url: string, verify = false): Promise<SmtpSettingView> {
    const endpoint = parseSmtpUrl(url);
    try {
      await resolvePublicAddress(endpoint.host, { allowPrivateNetworks: this.deps.config.allowPrivateNetworks });
    } catch (err) {
      if (!(err instanceof SafeFetchError)) throw err;
      throw invalid(`The SMTP host is not usable: ${err.message}`, 'Use a public mail server host name.');
    }
    if (verify) await this.verify(url);
    const now = this.deps.clock.now().toISOString();
    await this.repo.upsert({
      env_id: scope.envId,
      account_id: scope.accountId,
      smtp_url_enc: this.deps.secrets.encrypt(url),
      created_at: now,
      updated_at: now,
    });
    return this.getSmtpSetting(scope);
  }

  private async verify(url: string): Promise<void> {
    const probe = new SmtpEmailProvider({
      url,
      guard: { allowPrivateNetworks: this.deps.config.allowPrivateNetworks },
      connectionTimeoutMs: 10_000,
      greetingTimeoutMs: 10_000,
      socketTimeoutMs: 10_000,
    });
    try {
      await probe.verify();
    } catch (err) {
      const e = err as { response?: string; message?: string };
      throw new AppError('PROVIDER_ERROR', `The SMTP server check failed: ${(e.response ?? e.message ?? String(err)).slice(0, 300)}`, 'Check host, port and credentials; the setting was not saved.');
    } finally {
      await probe.close();
    }
  }

  async deleteSmtpSetting(scope: EnvScope): Promise<void> {
    if (!(await this.repo.delete(scope))) {
      throw new AppError('NOT_FOUND', 'This environment has no SMTP setting.', 'GET /settings/email/smtp shows what mail goes through.');
    }
  }
}

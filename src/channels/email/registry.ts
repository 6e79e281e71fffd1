import type { Deps } from '../../deps.js';
import type { EmailProvider } from '../types.js';
import { MailCatcherEmailProvider, type MailCatcherStore } from './mail-catcher.js';
import { MimeBuilder } from './mime-builder.js';
import { SmtpEmailProvider, type SmtpProviderOptions } from './smtp.js';

export type EmailProviderDeps = Pick<Deps, 'config' | 'ids' | 'clock' | 'secrets'>;

/** What the registry reads and writes in storage: the mail catcher's store and each environment's SMTP setting. */
export interface EmailStores {
  caught: MailCatcherStore;
  settings: { find(scope: { accountId: string; envId: string }): Promise<{ smtp_url_enc: string } | undefined> };
}

/** Transport tuning shared by every SMTP provider the registry creates. */
export type SmtpTuning = Partial<Omit<SmtpProviderOptions, 'url' | 'guard' | 'allowPrivateNetworks' | 'mime'>>;

/** Which provider an environment's mail goes through, and why. */
export type EmailRoute = { kind: 'environment'; url: string } | { kind: 'server'; url: string } | { kind: 'mail-catcher' };

/**
 * Picks the email provider per environment: the environment's own SMTP server
 * (PUT /settings/email/smtp), else the server's SMTP_URL, else the mail catcher (GET /outbox). One pooled
 * transport per distinct URL, kept until close(). Build one per process (workers share it).
 */
export class EmailProviders {
  readonly mailCatcher: MailCatcherEmailProvider;
  private readonly pools = new Map<string, SmtpEmailProvider>();
  /** One MIME thread for every SMTP provider of the process. */
  private readonly mime = new MimeBuilder();
  private closed = false;

  constructor(
    private readonly deps: EmailProviderDeps,
    private readonly stores: EmailStores,
    private readonly tuning: SmtpTuning = {},
  ) {
    this.mailCatcher = new MailCatcherEmailProvider(deps, stores.caught, { allowPrivateNetworks: deps.config.allowPrivateNetworks });
  }

  /** The route for an environment, read on every call so a settings change applies to the next send. */
  async routeFor(accountId: string, envId: string): Promise<EmailRoute> {
    const row = await this.stores.settings.find({ accountId, envId });
    if (row) return { kind: 'environment', url: this.deps.secrets.decrypt(row.smtp_url_enc) };
    if (this.deps.config.smtpUrl) return { kind: 'server', url: this.deps.config.smtpUrl };
    return { kind: 'mail-catcher' };
  }

  async forEnvironment(accountId: string, envId: string): Promise<EmailProvider> {
    return this.forRoute(await this.routeFor(accountId, envId));
  }

  /** The server-wide provider (SMTP_URL or the mail catcher), ignoring environment settings. */
  serverDefault(): EmailProvider {
    return this.forRoute(this.deps.config.smtpUrl ? { kind: 'server', url: this.deps.config.smtpUrl } : { kind: 'mail-catcher' });
  }

  forRoute(route: EmailRoute): EmailProvider {
    if (this.closed) throw new Error('EmailProviders is closed');
    if (route.kind === 'mail-catcher') return this.mailCatcher;
    // A URL from an environment setting is user input: the SSRF guard applies to its host.
    const guarded = route.kind === 'environment';
    const key = `${guarded ? 'guarded' : 'trusted'} ${route.url}`;
    let provider = this.pools.get(key);
    if (!provider) {
      provider = new SmtpEmailProvider({
        ...this.tuning,
        url: route.url,
        mime: this.mime,
        allowPrivateNetworks: this.deps.config.allowPrivateNetworks,
        ...(guarded ? { guard: { allowPrivateNetworks: this.deps.config.allowPrivateNetworks } } : {}),
      });
      this.pools.set(key, provider);
    }
    return provider;
  }

  /** Pooled SMTP transports currently open (one per distinct URL). */
  get poolCount(): number {
    return this.pools.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all([...all.map((p) => p.close()), this.mailCatcher.close()]);
    await this.mime.close();
  }
}

/** One provider without per-environment settings: SMTP for `smtpUrl` (default SMTP_URL), else the mail catcher. */
export function createEmailProvider(deps: EmailProviderDeps, store: MailCatcherStore, options: { smtpUrl?: string } & SmtpTuning = {}): EmailProvider {
  const { smtpUrl = deps.config.smtpUrl, ...tuning } = options;
  if (smtpUrl) return new SmtpEmailProvider({ ...tuning, url: smtpUrl, allowPrivateNetworks: deps.config.allowPrivateNetworks });
  return new MailCatcherEmailProvider(deps, store, { allowPrivateNetworks: deps.config.allowPrivateNetworks });
}

import type { VapidCredentials } from '../../channels/push/web-push-vapid.js';
import type { Deps } from '../../deps.js';
import { EnvironmentsRepository } from '../environments/environments.repository.js';
import { WebPushRepository } from './web-push.repository.js';

export type WebPushDeps = Pick<Deps, 'db' | 'secrets' | 'clock' | 'config'>;

export interface WebPushPublicSettings {
  /** applicationServerKey for PushManager.subscribe(). */
  publicKey: string;
  subject: string;
}

const MAX_CACHED_ENVIRONMENTS = 10_000;

/**
 * VAPID identity of each environment: one P-256 key pair generated on first need (any process
 * may be first; the database keeps exactly one), the private key sealed at rest.
 */
export class WebPushService {
  /** Keys never change once stored, so a process keeps what it has read. */
  private readonly cache = new Map<string, { publicKey: string; privateKey: string }>();

  constructor(private readonly deps: WebPushDeps) {}

  /** The VAPID `sub`: CLARION_WEB_PUSH_SUBJECT, else an https public URL, else mailto: the default sender. */
  subject(): string {
    const { webPushSubject, publicUrl, defaultFromAddress } = this.deps.config;
    if (webPushSubject) return webPushSubject;
    if (publicUrl?.startsWith('https://')) return new URL(publicUrl).origin;
    return `mailto:${defaultFromAddress}`;
  }

  async credentials(accountId: string, envId: string): Promise<VapidCredentials> {
    const key = `${accountId} ${envId}`;
    let keys = this.cache.get(key);
    if (!keys) {
      const repo = new WebPushRepository(this.deps.db);
      let row = await repo.find(accountId, envId);
      if (!row) {
        // Loaded here, not at start: a process whose environments never use web push never holds it (docs/memory.md).
        const { default: webpush } = await import('web-push');
        const generated = webpush.generateVAPIDKeys();
        await repo.insertIfAbsent({
          env_id: envId,
          account_id: accountId,
          public_key: generated.publicKey,
          private_key_enc: this.deps.secrets.encrypt(generated.privateKey),
          created_at: this.deps.clock.now().toISOString(),
        });
        row = await repo.find(accountId, envId);
        if (!row) throw new Error(`environment ${envId} has no web push keys and none could be stored`);
      }
      keys = { publicKey: row.public_key, privateKey: this.deps.secrets.decrypt(row.private_key_enc) };
      if (this.cache.size >= MAX_CACHED_ENVIRONMENTS) this.cache.clear();
      this.cache.set(key, keys);
    }
    return { ...keys, subject: this.subject() };
  }

  async publicSettings(accountId: string, envId: string): Promise<WebPushPublicSettings> {
    const { publicKey, subject } = await this.credentials(accountId, envId);
    return { publicKey, subject };
  }

  /** The in-app clients' account metadata (pingram UserApi.getAccountMetadata, @notificationapi/core getUserAccountMetadata). */
  async accountMetadata(accountId: string, envId: string): Promise<{ userAccountMetadata: { logo: string; environmentVapidPublicKey: string; hasWebPushEnabled: boolean } }> {
    const env = await new EnvironmentsRepository(this.deps.db).find(accountId, envId);
    const disabled = env ? (JSON.parse(env.disable_sending) as string[]) : [];
    const { publicKey } = await this.credentials(accountId, envId);
    return { userAccountMetadata: { logo: '', environmentVapidPublicKey: publicKey, hasWebPushEnabled: !disabled.includes('WEB_PUSH') } };
  }
}

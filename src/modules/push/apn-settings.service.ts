import type { ApnsCredentials } from '../../channels/push/apns.js';
import { importPKCS8 } from 'jose';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { type ApnScope, type ApnSettingsRow, ApnSettingsRepository } from './apn-settings.repository.js';

/** The SDK's APNConfig (pingram PushSettingsApi): Key is the .p8 signing key, Topic the app's bundle id. */
export interface ApnConfig {
  KeyId: string;
  Key: string;
  TeamId: string;
  Topic: string;
}

/** What the APNs provider signs and addresses with. */

const NOT_CONFIGURED_FIX = 'Store the APNs key with PUT /settings/push/apn.';

/**
 * Per-environment APNs credentials. The .p8 key is encrypted at rest and never returned: reads
 * show a masked key ending with its last characters, so a caller can tell which key is stored.
 */
export class ApnSettingsService {
  private readonly repo: ApnSettingsRepository;
  constructor(private readonly deps: Pick<Deps, 'db' | 'clock' | 'secrets'>) {
    this.repo = new ApnSettingsRepository(deps.db);
  }

  async get(scope: ApnScope): Promise<ApnConfig> {
    const row = await this.repo.find(scope);
    if (!row) throw new AppError('NOT_FOUND', 'This environment has no APNs configuration.', NOT_CONFIGURED_FIX);
    return toView(row);
  }

  async put(scope: ApnScope, config: ApnConfig): Promise<ApnConfig> {
    const pem = normalizeP8(config.Key);
    try {
      await importPKCS8(pem, 'ES256');
    } catch {
      throw invalid('Key is not an ES256 (P-256) private key in PKCS#8 PEM form.', 'Paste the whole content of the AuthKey_<KeyId>.p8 file downloaded from the Apple developer account.');
    }
    const now = this.deps.clock.now().toISOString();
    const row: ApnSettingsRow = {
      env_id: scope.envId,
      account_id: scope.accountId,
      key_id: config.KeyId.trim(),
      team_id: config.TeamId.trim(),
      topic: config.Topic.trim(),
      key_enc: this.deps.secrets.encrypt(pem),
      key_hint: keyBody(pem).slice(-4),
      created_at: now,
      updated_at: now,
    };
    await this.repo.upsert(row);
    return toView(row);
  }

  async delete(scope: ApnScope): Promise<void> {
    if (!(await this.repo.delete(scope))) throw new AppError('NOT_FOUND', 'This environment has no APNs configuration.', NOT_CONFIGURED_FIX);
  }

  /** Decrypted credentials for the provider, or null when the environment has none. */
  async credentials(scope: ApnScope): Promise<ApnsCredentials | null> {
    const row = await this.repo.find(scope);
    if (!row) return null;
    return { keyId: row.key_id, teamId: row.team_id, topic: row.topic, privateKey: this.deps.secrets.decrypt(row.key_enc) };
  }
}

function toView(row: ApnSettingsRow): ApnConfig {
  return { KeyId: row.key_id, Key: `********${row.key_hint}`, TeamId: row.team_id, Topic: row.topic };
}

const keyBody = (pem: string) => pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');

/** Accepts the .p8 file as downloaded, with escaped newlines (pasted from JSON/env files), or its bare base64 body. */
export function normalizeP8(raw: string): string {
  const text = raw.replace(/\\n/g, '\n').trim();
  if (text.includes('-----BEGIN')) return `${text}\n`;
  const body = text.replace(/\s+/g, '');
  return `-----BEGIN PRIVATE KEY-----\n${body.match(/.{1,64}/g)?.join('\n') ?? ''}\n-----END PRIVATE KEY-----\n`;
}

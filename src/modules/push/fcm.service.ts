import { createHash } from 'node:crypto';
import { FcmAccountError, type FcmServiceAccount, parseServiceAccount } from '../../channels/push/fcm-account.js';
import type { PushScope } from '../../channels/push/types.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { SafeFetchError, resolvePublicAddress } from '../../net/ssrf.js';
import { type FcmScope, type FcmSettingsRow, FcmSettingsRepository } from './fcm.repository.js';

/** GET /settings/push/fcm: the service account as uploaded, without its private key. */
export interface FcmSettingsView {
  /** The service-account JSON (string, as the SDK's PushSettingsFCMResponse) minus `private_key`. */
  fcmConfig: string;
  projectId: string;
  clientEmail: string;
  tokenUri: string;
  updatedAt: string;
}

const FIX = 'Upload the JSON key file of a Firebase service account (Firebase console > Project settings > Service accounts > Generate new private key).';

/** FCM credentials per environment; the private key is encrypted at rest and never returned. */
export class FcmSettingsService {
  private readonly repo: FcmSettingsRepository;
  constructor(private readonly deps: Pick<Deps, 'db' | 'secrets' | 'clock' | 'config'>) {
    this.repo = new FcmSettingsRepository(deps.db);
  }

  /** The FCM provider's credentials lookup (channels/push/fcm.ts FcmCredentials). */
  async credentials(scope: PushScope): Promise<{ account: FcmServiceAccount; version: string } | null> {
    const row = await this.repo.find(scope);
    return row ? { account: toAccount(this.deps, row), version: versionOf(row) } : null;
  }

  private view(row: FcmSettingsRow): FcmSettingsView {
    return { fcmConfig: row.account_json, projectId: row.project_id, clientEmail: row.client_email, tokenUri: row.token_uri, updatedAt: row.updated_at };
  }

  async get(scope: FcmScope): Promise<FcmSettingsView> {
    const row = await this.repo.find(scope);
    if (!row) throw new AppError('NOT_FOUND', 'This environment has no FCM settings.', `PUT /settings/push/fcm with {"fcmConfig": "<service account JSON>"}. ${FIX}`);
    return this.view(row);
  }

  async put(scope: FcmScope, fcmConfig: unknown): Promise<FcmSettingsView> {
    const allowPrivate = this.deps.config.allowPrivateNetworks;
    let parsed: ReturnType<typeof parseServiceAccount>;
    try {
      parsed = parseServiceAccount(fcmConfig, { allowInsecureTokenUri: allowPrivate });
    } catch (err) {
      if (err instanceof FcmAccountError) throw invalid(`Invalid FCM service account: ${err.message}`, FIX);
      throw err;
    }
    const { account, publicFields } = parsed;
    // token_uri comes from the uploaded file: the server will POST to it, so it must be a public host.
    // Refused now when it points inside; every token request checks (and pins) it again, so a name
    // that does not resolve at this moment is not a reason to refuse the file.
    try {
      await resolvePublicAddress(new URL(account.tokenUri).hostname, { allowPrivateNetworks: allowPrivate });
    } catch (err) {
      if (!(err instanceof SafeFetchError)) throw err;
      if (err.code === 'DNS_FAILED') return this.save(scope, account, publicFields);
      throw invalid(`Invalid FCM service account: "token_uri" is not usable: ${err.message}`, 'Google service accounts use https://oauth2.googleapis.com/token.');
    }
    return this.save(scope, account, publicFields);
  }

  private async save(scope: FcmScope, account: FcmServiceAccount, publicFields: Record<string, unknown>): Promise<FcmSettingsView> {
    const now = this.deps.clock.now().toISOString();
    await this.repo.upsert({
      env_id: scope.envId,
      account_id: scope.accountId,
      project_id: account.projectId,
      client_email: account.clientEmail,
      token_uri: account.tokenUri,
      account_json: JSON.stringify(publicFields),
      private_key_enc: this.deps.secrets.encrypt(account.privateKey),
      created_at: now,
      updated_at: now,
    });
    return this.get(scope);
  }

  async delete(scope: FcmScope): Promise<void> {
    if (!(await this.repo.delete(scope))) {
      throw new AppError('NOT_FOUND', 'This environment has no FCM settings.', 'Nothing to delete; GET /settings/push/fcm shows the current settings.');
    }
  }
}

function toAccount(deps: Pick<Deps, 'secrets'>, row: FcmSettingsRow): FcmServiceAccount {
  const stored = JSON.parse(row.account_json) as { private_key_id?: unknown };
  return {
    projectId: row.project_id,
    clientEmail: row.client_email,
    tokenUri: row.token_uri,
    privateKey: deps.secrets.decrypt(row.private_key_enc),
    ...(typeof stored.private_key_id === 'string' ? { privateKeyId: stored.private_key_id } : {}),
  };
}

/** Changes whenever the stored credentials are replaced (each encryption has a fresh IV). */
function versionOf(row: FcmSettingsRow): string {
  return createHash('sha256').update(`${row.private_key_enc}\n${row.client_email}\n${row.token_uri}\n${row.project_id}`).digest('base64url');
}

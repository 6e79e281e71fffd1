import type { Deps } from '../../deps.js';
import { AppError } from '../../errors.js';
import { safeEqual, sha256Hex } from '../../secrets.js';
import type { AccountsRepository } from '../accounts/accounts.repository.js';
import type { EnvironmentsRepository } from '../environments/environments.repository.js';
import type { KeysRepository } from '../keys/keys.repository.js';
import { API_KEY_PREFIX, isApiKey, keyTypeOf, scopeOf } from '../keys/api-key.js';
import { ApiKeyCache } from './api-key-cache.js';
import type { AuthContext } from './auth-context.js';
import { verifyAccountToken } from './jwt.js';

export type { AuthContext } from './auth-context.js';

const forbidden = (message: string, fix: string) => new AppError('FORBIDDEN', message, fix);

const unauthorized = (message: string) =>
  new AppError('UNAUTHORIZED', message, 'Send "Authorization: Bearer <API key>", Basic clientId:clientSecret, or a token from `clarion token`.');

/** Do not write last_used_at more often than this per key: it would put a write on every request. */
const TOUCH_INTERVAL_MS = 60_000;

export interface AuthRepositories {
  keys: KeysRepository;
  environments: EnvironmentsRepository;
  accounts: AccountsRepository;
}

export class AuthService {
  private readonly keys: KeysRepository;
  private readonly environments: EnvironmentsRepository;
  private readonly accounts: AccountsRepository;
  private readonly lastTouched = new Map<string, number>();
  /** API keys this process resolved recently (one AuthService per process: the services object). */
  readonly apiKeys: ApiKeyCache;

  constructor(
    private readonly deps: Deps,
    repositories: AuthRepositories,
  ) {
    this.keys = repositories.keys;
    this.environments = repositories.environments;
    this.accounts = repositories.accounts;
    this.apiKeys = new ApiKeyCache(deps.clock);
  }

  /**
   * authenticate's answer without waiting, when it needs nothing but this process's memory: an
   * API key resolved in the last 2 s (ApiKeyCache), and no other envId asked for. Otherwise
   * undefined, and the caller awaits authenticate. Every request with an API key comes here
   * first: a promise chain per request was a measurable share of POST /send.
   */
  cachedApiKey(authorization: string | undefined, envIdParam: string | undefined): AuthContext | undefined {
    if (authorization === undefined || !/^bearer /i.test(authorization)) return undefined;
    const credential = authorization.slice(7).trim();
    // Secret keys only: a public key always goes through authenticate, which decides whether the route takes it.
    if (!credential.startsWith(API_KEY_PREFIX)) return undefined;
    const auth = this.cachedKey(credential);
    if (!auth || (envIdParam !== undefined && envIdParam !== '' && envIdParam !== auth.envId)) return undefined;
    return auth;
  }

  /** A copy of the context of an API key resolved in the last 2 s (ApiKeyCache), else undefined. */
  private cachedKey(key: string): AuthContext | undefined {
    return this.apiKeys.get(key);
  }

  /**
   * Who the credentials are. A public key is refused (403) unless `options.publicKey` allows it:
   * only the callers that know what a public key may do there pass it.
   */
  async authenticate(authorization: string | undefined, envIdParam: string | undefined, options: { publicKey?: boolean } = {}): Promise<AuthContext> {
    if (!authorization) throw unauthorized('Missing Authorization header.');
    const space = authorization.indexOf(' ');
    const scheme = authorization.slice(0, space).toLowerCase();
    const credential = authorization.slice(space + 1).trim();
    if (space < 0 || !credential) throw unauthorized('Malformed Authorization header.');

    let auth: AuthContext;
    if (scheme === 'bearer' && isApiKey(credential)) auth = await this.byApiKey(credential);
    else if (scheme === 'bearer') auth = await this.byJwt(credential);
    else if (scheme === 'basic') auth = await this.byClientCredentials(credential);
    else throw unauthorized(`Unsupported Authorization scheme "${scheme}".`);
    if (auth.publicKey && !options.publicKey) throw publicKeyRefused();

    if (envIdParam !== undefined && envIdParam !== '' && envIdParam !== auth.envId) {
      if (auth.scope !== 'account') {
        throw forbidden(
          'These credentials act only in their own environment, not in the requested envId.',
          'Use a key of that environment, or an account-scope API key (POST /keys with scope "account").',
        );
      }
      const env = await this.environments.find(auth.accountId, envIdParam);
      if (!env) throw unauthorized(`Environment "${envIdParam}" does not belong to this account.`);
      auth.envId = envIdParam;
    }
    return auth;
  }

  private async byApiKey(key: string): Promise<AuthContext> {
    const cached = this.cachedKey(key);
    if (cached) return cached;
    const row = await this.keys.findByHash(sha256Hex(key));
    if (!row) throw unauthorized('Unknown API key.');
    if (row.revoked) throw unauthorized('This API key has been revoked.');
    this.touch(row.id);
    const auth: AuthContext = { accountId: row.account_id, envId: row.env_id, via: 'apiKey', scope: scopeOf(row), keyId: row.id };
    if (keyTypeOf(row) === 'public') auth.publicKey = true;
    this.apiKeys.set(key, auth);
    return { ...auth };
  }

  private async byJwt(token: string): Promise<AuthContext> {
    const claims = await verifyAccountToken(this.deps.secrets, token, this.deps.clock.now());
    if (!claims) throw unauthorized('Invalid or expired token.');
    // A token outlives nothing it names: one for a deleted account is no credential.
    if (!(await this.accounts.find(claims.accountId))) throw unauthorized('The account of this token does not exist.');
    return { accountId: claims.accountId, envId: null, via: 'jwt', scope: 'account', subject: claims.subject };
  }

  private async byClientCredentials(encoded: string): Promise<AuthContext> {
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon <= 0) throw unauthorized('Basic credentials must be clientId:clientSecret.');
    // No id or secret holds one, and PostgreSQL refuses it in a query parameter (a 500 there).
    if (decoded.includes('\0')) throw unauthorized('Basic credentials must not contain a NUL character.');
    const clientId = decoded.slice(0, colon);
    const secret = decoded.slice(colon + 1);
    const env = await this.environments.findForAuthentication(clientId);
    if (!env || !safeEqual(this.deps.secrets.decrypt(env.client_secret_enc), secret)) {
      throw unauthorized('Unknown clientId or wrong clientSecret.');
    }
    return { accountId: env.account_id, envId: env.client_id, via: 'basic', scope: 'environment' };
  }

  private touch(keyId: string): void {
    const now = this.deps.clock.now();
    const last = this.lastTouched.get(keyId) ?? 0;
    if (now.getTime() - last < TOUCH_INTERVAL_MS) return;
    this.lastTouched.set(keyId, now.getTime());
    this.keys.touch(keyId, now.toISOString()).catch((err) => this.deps.logger.warn({ err }, 'could not record key use'));
  }
}

/** What a public key is told where it may not go (README: Public keys). */
export const publicKeyRefused = () =>
  forbidden(
    'This is a public key: it may only do what a web page may (the in-app user routes acting for a user, GET /components/public), never send, read logs or manage the account.',
    'Call this operation from your server with a secret key (clarion_sk_...).',
  );

export const environmentRequired = () =>
  new AppError('ENVIRONMENT_REQUIRED', 'This operation acts in an environment, and none was selected.', 'Add ?envId=<clientId> to the URL (required when authenticating with a JWT).');

/** The environment an operation acts in; a JWT caller must name it with `envId`. */
export function requireEnv(auth: AuthContext): string {
  if (!auth.envId) throw environmentRequired();
  return auth.envId;
}

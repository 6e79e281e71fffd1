import { Agent } from 'undici';
import type { Deps } from '../../deps.js';
import { DeliveryError, type DeliveryResult } from '../types.js';
import type { FcmServiceAccount } from './fcm-account.js';
import { FcmTokenCache } from './fcm-auth.js';
import { TransportError, post, retryAfterMs } from './fcm-http.js';
import { FCM_MAX_PAYLOAD_BYTES, buildFcmRequest, classifyFcmError, fcmPayloadBytes, isAccessTokenRejected, parseFcmError } from './fcm-message.js';
import type { MobilePushMessage, MobilePushProvider, PushScope, PushToken } from './types.js';

export type FcmProviderDeps = Pick<Deps, 'config' | 'clock'>;

/**
 * An environment's service account, and a version that changes whenever it is replaced (cached
 * tokens of an older version are dropped); null when the environment has none.
 */
export type FcmCredentials = (scope: PushScope) => Promise<{ account: FcmServiceAccount; version: string } | null>;

export interface FcmProviderOptions {
  /** FCM API base; default config.fcmBaseUrl (CLARION_FCM_BASE_URL). */
  baseUrl?: string;
  /** Per HTTP exchange (token request, send); default 10 s. */
  timeoutMs?: number;
  /** Renew an access token this long before it expires; default 60 s. */
  refreshMarginMs?: number;
}

export interface FcmProvider extends MobilePushProvider {
  /** The per-environment access-token cache (exposed for tests and diagnostics). */
  readonly tokens: FcmTokenCache;
}

/**
 * FCM HTTP v1: `POST {base}/v1/projects/{project_id}/messages:send` with an OAuth2 access token
 * obtained from the environment's service account (PUT /settings/push/fcm) by the JWT-bearer
 * grant at the account's token_uri. Tokens are cached per environment until shortly before they
 * expire; a 401 drops the token and the send is tried once more with a new one.
 */
export function createFcmProvider(deps: FcmProviderDeps, lookup: FcmCredentials, options: FcmProviderOptions = {}): FcmProvider {
  const baseUrl = (options.baseUrl ?? deps.config.fcmBaseUrl).replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 10_000;
  const tokens = new FcmTokenCache({
    clock: deps.clock,
    allowPrivateNetworks: deps.config.allowPrivateNetworks,
    timeoutMs,
    refreshMarginMs: options.refreshMarginMs ?? 60_000,
  });
  // Keep-alive connections to the configured FCM host (server configuration, not user input).
  const agent = new Agent({ keepAliveTimeout: 30_000, connect: { timeout: timeoutMs } });
  let closed = false;

  const credentials = async (scope: PushScope): Promise<{ account: FcmServiceAccount; version: string }> => {
    const found = await lookup(scope);
    if (!found) {
      throw new DeliveryError('NOT_CONFIGURED', 'This environment has no FCM credentials; upload a service account with PUT /settings/push/fcm.', {
        retryable: false,
      });
    }
    return found;
  };

  async function sendOnce(url: string, accessToken: string, body: string): Promise<Awaited<ReturnType<typeof post>>> {
    try {
      return await post(url, {
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json; charset=utf-8', accept: 'application/json' },
        body,
        timeoutMs,
        dispatcher: agent,
      });
    } catch (err) {
      if (!(err instanceof TransportError)) throw err;
      throw new DeliveryError(err.kind === 'TIMEOUT' ? 'TIMEOUT' : 'FCM_CONNECTION_FAILED', `FCM send failed: ${err.message}`, { retryable: true });
    }
  }

  return {
    tokens,
    async send(scope: PushScope, token: PushToken, message: MobilePushMessage): Promise<DeliveryResult> {
      if (closed) throw new DeliveryError('SHUTTING_DOWN', 'The FCM provider is closed.', { retryable: true });
      if (token.type !== 'FCM') throw new DeliveryError('UNSUPPORTED_TOKEN_TYPE', `An ${token.type} token cannot be sent over FCM.`, { retryable: false });
      const { account, version } = await credentials(scope);
      const key = `${scope.accountId}/${scope.envId}`;
      const url = `${baseUrl}/v1/projects/${account.projectId}/messages:send`;
      const request = buildFcmRequest(token.token, message, deps.clock.now().getTime());
      const payloadBytes = fcmPayloadBytes(request.message);
      if (payloadBytes > FCM_MAX_PAYLOAD_BYTES) {
        // The title and message are cut to nothing by now: the custom data alone is too large.
        const dataBytes = Buffer.byteLength(JSON.stringify(request.message.data ?? {}));
        throw new DeliveryError(
          'FCM_PAYLOAD_TOO_LARGE',
          `the FCM payload is ${payloadBytes} bytes with the title and message shortened to nothing, over FCM's ${FCM_MAX_PAYLOAD_BYTES}: options.push.customData takes ${dataBytes} bytes`,
          { retryable: false, recipient: token.token },
        );
      }
      const body = JSON.stringify(request);

      for (let attempt = 1; ; attempt++) {
        const accessToken = await tokens.get(key, version, account);
        const answer = await sendOnce(url, accessToken, body);
        if (answer.status >= 200 && answer.status < 300) {
          let name: unknown;
          try {
            name = (JSON.parse(answer.text) as { name?: unknown }).name;
          } catch {
            /* handled below */
          }
          if (typeof name !== 'string' || !name) {
            throw new DeliveryError('FCM_ERROR', `FCM answered ${answer.status} without a message name.`, { retryable: false });
          }
          return { providerMessageId: name, response: `${answer.status} ${name}` };
        }
        const info = parseFcmError(answer);
        if (attempt === 1 && isAccessTokenRejected(info)) {
          tokens.invalidate(key, accessToken);
          continue;
        }
        throw classifyFcmError(info, token.token, retryAfterMs(answer.headers, deps.clock.now()));
      }
    },
    async close() {
      closed = true;
      tokens.clear();
      await agent.close();
    },
  };
}

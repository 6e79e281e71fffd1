import http2 from 'node:http2';
import tls from 'node:tls';
import { type Clock, systemClock } from '../../clock.js';
import { DeliveryError } from '../types.js';
import { ApnsTokenCache } from './apns-jwt.js';
import { APNS_MAX_PAYLOAD_BYTES, buildApnsRequest } from './apns-payload.js';
import type { MobilePushMessage, MobilePushProvider, PushScope, PushSendResult, PushToken } from './types.js';

/** An environment's APNs token-auth credentials (PUT /settings/push/apn). */
export interface ApnsCredentials {
  keyId: string;
  teamId: string;
  /** apns-topic: the app's bundle id. */
  topic: string;
  /** PKCS#8 PEM of the ES256 (.p8) key. */
  privateKey: string;
}

export interface ApnsProviderOptions {
  /** Origin of the production gateway, e.g. https://api.push.apple.com. */
  productionUrl: string;
  /** Origin of the development gateway, e.g. https://api.sandbox.push.apple.com. */
  sandboxUrl: string;
  /** The environment's credentials; null when it has none (NOT_CONFIGURED). */
  credentials(scope: PushScope): Promise<ApnsCredentials | null>;
  clock?: Clock;
  /** Extra CA certificates (PEM) trusted besides the system roots (a TLS-inspecting proxy, a test peer). */
  ca?: string;
  /** One request, from sending to the end of the response. */
  requestTimeoutMs?: number;
  /** Age at which a provider token is replaced (APNs accepts 20 to 60 minutes). */
  tokenRefreshSeconds?: number;
}

/** How long close() lets requests in flight finish (see close). */
const CLOSE_GRACE_MS = 1_000;

/** Reasons that mean the device token will never work again: the caller removes it from the user. */
const INVALID_TOKEN_REASONS = new Set(['BadDeviceToken', 'Unregistered', 'ExpiredToken']);

interface ApnsResponse {
  status: number;
  apnsId?: string;
  body: string;
}

/**
 * APNs over HTTP/2 with token-based (JWT) authentication. One session per gateway origin is
 * kept open and multiplexes every send; a session that errs, closes or receives GOAWAY is
 * replaced on the next send.
 */
export class ApnsProvider implements MobilePushProvider {
  private readonly sessions = new Map<string, http2.ClientHttp2Session>();
  private readonly tokens: ApnsTokenCache;
  private readonly clock: Clock;
  private closed = false;

  constructor(private readonly options: ApnsProviderOptions) {
    this.clock = options.clock ?? systemClock;
    this.tokens = new ApnsTokenCache(this.clock, options.tokenRefreshSeconds);
  }

  /** Open sessions, per origin (for tests and metrics). */
  get sessionCount(): number {
    return this.sessions.size;
  }

  async send(scope: PushScope, token: PushToken, message: MobilePushMessage): Promise<PushSendResult> {
    const credentials = await this.options.credentials(scope);
    if (!credentials) {
      throw new DeliveryError('NOT_CONFIGURED', 'this environment has no APNs credentials (PUT /settings/push/apn)', { retryable: false, recipient: token.token });
    }
    const origin = token.environment === 'production' ? this.options.productionUrl : this.options.sandboxUrl;
    const request = buildApnsRequest(message, credentials.topic, this.clock.now().getTime());
    if (Buffer.byteLength(request.payload) > APNS_MAX_PAYLOAD_BYTES) {
      throw new DeliveryError('APNS_PAYLOAD_TOO_LARGE', `the APNs payload is ${Buffer.byteLength(request.payload)} bytes; the limit is ${APNS_MAX_PAYLOAD_BYTES}`, {
        retryable: false,
        recipient: token.token,
      });
    }

    let jwt = await this.signedToken(credentials);
    let response = await this.post(origin, token.token, { ...request.headers, authorization: `bearer ${jwt}` }, request.payload);
    if (response.status === 403 && reasonOf(response) === 'ExpiredProviderToken') {
      // Our token outlived APNs' patience (clock skew, a long pause): sign a new one and try once more.
      await this.tokens.invalidate(credentials, jwt);
      jwt = await this.signedToken(credentials);
      response = await this.post(origin, token.token, { ...request.headers, authorization: `bearer ${jwt}` }, request.payload);
    }
    let movedTo: 'production' | 'sandbox' | undefined;
    const other = origin === this.options.productionUrl ? this.options.sandboxUrl : this.options.productionUrl;
    if (response.status === 400 && reasonOf(response) === 'BadDeviceToken' && other !== origin) {
      // APNs answers BadDeviceToken to a token of the other environment too ("verify that the token
      // matches the environment"): a development build's token filed as production, or the reverse.
      // Removing it would silence a working device, so the other gateway decides.
      response = await this.post(other, token.token, { ...request.headers, authorization: `bearer ${jwt}` }, request.payload);
      movedTo = other === this.options.sandboxUrl ? 'sandbox' : 'production';
    }
    if (response.status === 200) {
      const answer = `200 apns-id ${response.apnsId ?? ''}`.trim();
      const moved = movedTo ? { response: `${answer} (by the ${movedTo} gateway: the token's environment names the other)`, tokenEnvironment: movedTo } : {};
      return { providerMessageId: response.apnsId, response: answer, accepted: [token.token], ...moved };
    }
    throw failure(response, token.token);
  }

  /**
   * Ends the sessions: requests in flight get CLOSE_GRACE_MS to finish, then their sessions are
   * destroyed (those calls fail, and are made again as after a crash). A graceful HTTP/2 close
   * waits for every open stream, so one slow answer held a stop for up to the request timeout
   * (30 s: an audit's SIGTERM took 24 s, past docker stop's 10 s).
   */
  async close(): Promise<void> {
    this.closed = true;
    const sessions = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(
      sessions.map(
        (session) =>
          new Promise<void>((resolve) => {
            if (session.closed || session.destroyed) return resolve();
            const cutOff = setTimeout(() => session.destroy(), CLOSE_GRACE_MS);
            session.close(() => {
              clearTimeout(cutOff);
              resolve();
            });
          }),
      ),
    );
  }

  private async signedToken(credentials: ApnsCredentials): Promise<string> {
    try {
      return await this.tokens.token(credentials);
    } catch (err) {
      throw new DeliveryError('APNS_INVALID_KEY', `the stored APNs key cannot sign: ${(err as Error).message}`, { retryable: false });
    }
  }

  private session(origin: string): http2.ClientHttp2Session {
    if (this.closed) throw new DeliveryError('SHUTTING_DOWN', 'the APNs provider is closed', { retryable: true });
    const existing = this.sessions.get(origin);
    if (existing && !existing.closed && !existing.destroyed) return existing;
    const session = http2.connect(origin, this.options.ca ? { ca: [...tls.rootCertificates, this.options.ca] } : {});
    const forget = () => {
      if (this.sessions.get(origin) === session) this.sessions.delete(origin);
    };
    // Errors reach the requests in flight; the session itself is just dropped.
    session.on('error', forget);
    session.on('close', forget);
    session.on('goaway', forget);
    this.sessions.set(origin, session);
    return session;
  }

  private post(origin: string, deviceToken: string, headers: Record<string, string>, payload: string): Promise<ApnsResponse> {
    const timeoutMs = this.options.requestTimeoutMs ?? 30_000;
    return new Promise<ApnsResponse>((resolve, reject) => {
      let stream: http2.ClientHttp2Stream;
      try {
        stream = this.session(origin).request({
          ':method': 'POST',
          ':path': `/3/device/${encodeURIComponent(deviceToken)}`,
          'content-type': 'application/json',
          ...headers,
        });
      } catch (err) {
        return reject(err instanceof DeliveryError ? err : connectionError(err));
      }
      let status = 0;
      let apnsId: string | undefined;
      let body = '';
      stream.setEncoding('utf8');
      stream.on('response', (h) => {
        status = Number(h[':status']);
        const id = h['apns-id'];
        apnsId = Array.isArray(id) ? id[0] : id;
      });
      stream.on('data', (chunk: string) => {
        if (body.length < 10_000) body += chunk;
      });
      stream.on('end', () => (status ? resolve({ status, apnsId, body }) : reject(connectionError(new Error('the stream ended without a response')))));
      stream.on('error', (err) => reject(connectionError(err)));
      stream.on('close', () => {
        if (!status) reject(connectionError(new Error(`the stream closed (code ${stream.rstCode})`)));
      });
      stream.setTimeout(timeoutMs, () => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(new DeliveryError('TIMEOUT', `APNs did not answer within ${timeoutMs} ms`, { retryable: true }));
      });
      stream.end(payload);
    });
  }
}

function reasonOf(response: ApnsResponse): string | undefined {
  try {
    const reason = (JSON.parse(response.body) as { reason?: unknown }).reason;
    return typeof reason === 'string' ? reason : undefined;
  } catch {
    return undefined;
  }
}

/** BadDeviceToken -> APNS_BAD_DEVICE_TOKEN */
const codeOf = (reason: string) => `APNS_${reason.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/[^A-Za-z0-9_]/g, '_').toUpperCase()}`;

function failure(response: ApnsResponse, deviceToken: string): DeliveryError {
  const reason = reasonOf(response) ?? `HTTP_${response.status}`;
  const providerCode = `${response.status} ${reason}`;
  const text = `APNs answered ${providerCode}`;
  if (INVALID_TOKEN_REASONS.has(reason) || response.status === 410) {
    return new DeliveryError(codeOf(reason), text, { retryable: false, providerCode, recipient: deviceToken, recipientInvalid: true });
  }
  const retryable = response.status === 429 || response.status >= 500;
  return new DeliveryError(codeOf(reason), text, { retryable, providerCode, recipient: deviceToken });
}

function connectionError(err: unknown): DeliveryError {
  return new DeliveryError('APNS_CONNECTION_FAILED', `APNs connection failed: ${err instanceof Error ? err.message : String(err)}`, { retryable: true });
}

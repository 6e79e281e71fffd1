import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import { type JWTPayload, type ProtectedHeaderParameters, decodeProtectedHeader, jwtVerify } from 'jose';

/**
 * A local APNs gateway: HTTP/2 over TLS (a throwaway self-signed certificate made with the
 * openssl CLI), speaking the provider API (POST /3/device/<token>) as Apple documents it. It
 * verifies the ES256 provider token with the key's public half (signature, kid, iss, age),
 * the apns-* headers and the JSON payload, answers apns-id, and can be told to answer
 * BadDeviceToken / Unregistered / 429 / ExpiredProviderToken and the like.
 */

export interface TestCertificate {
  cert: string;
  key: string;
  /** The certificate as a file (for CLARION_APNS_CA_FILE). */
  certFile: string;
  dispose(): void;
}

/** A self-signed certificate for 127.0.0.1 and localhost, valid for a day. */
export function createTestCertificate(): TestCertificate {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clarion-apns-tls-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'],
    { stdio: 'pipe' },
  );
  return {
    cert: fs.readFileSync(certFile, 'utf8'),
    key: fs.readFileSync(keyFile, 'utf8'),
    certFile,
    dispose: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

export interface ApnsPeerOptions {
  certificate: TestCertificate;
  /** Public half of the .p8 key (what Apple holds). */
  publicKey: CryptoKey | Parameters<typeof jwtVerify>[1];
  keyId: string;
  teamId: string;
  /** The bundle id the key may push to. */
  topic: string;
  /** The gateway's clock, in ms (tokens older than an hour are ExpiredProviderToken). */
  now?: () => number;
}

export interface ApnsAnswer {
  status: number;
  reason?: string;
  /** Unregistered: when the token stopped being valid (ms since epoch). */
  timestamp?: number;
}

export interface ApnsPeerRequest {
  deviceToken: string;
  headers: Record<string, string>;
  /** Parsed JSON body. */
  payload: Record<string, unknown>;
  rawPayload: string;
  jwt?: string;
  jwtHeader?: ProtectedHeaderParameters;
  jwtClaims?: JWTPayload;
  /** 1 for the first HTTP/2 session the gateway saw, 2 for the next, ... */
  session: number;
  answer: ApnsAnswer & { apnsId: string };
}

const PUSH_TYPES = new Set(['alert', 'background', 'voip', 'complication', 'fileprovider', 'mdm', 'location', 'liveactivity', 'pushtotalk']);

export class ApnsPeer {
  readonly requests: ApnsPeerRequest[] = [];
  url = '';
  private readonly server: http2.Http2SecureServer;
  private readonly sessionIds = new WeakMap<http2.ServerHttp2Session, number>();
  private readonly openSessions = new Set<http2.ServerHttp2Session>();
  private sessionsSeen = 0;
  private readonly unregistered = new Map<string, number>();
  private readonly scripted = new Map<string, ApnsAnswer[]>();
  private revokedBefore = 0;

  constructor(private readonly options: ApnsPeerOptions) {
    this.server = http2.createSecureServer({ cert: options.certificate.cert, key: options.certificate.key });
    this.server.on('session', (session) => {
      this.sessionIds.set(session, ++this.sessionsSeen);
      this.openSessions.add(session);
      session.on('close', () => this.openSessions.delete(session));
    });
    this.server.on('stream', (stream, headers) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        this.handle(stream, headers, Buffer.concat(chunks).toString('utf8')).catch((err) => {
          stream.respond({ ':status': 500 });
          stream.end(JSON.stringify({ reason: 'InternalServerError', detail: String(err) }));
        });
      });
    });
  }

  /** HTTP/2 sessions (TLS connections) opened by clients so far. */
  get sessionCount(): number {
    return this.sessionsSeen;
  }

  /** Sessions currently open. */
  get openSessionCount(): number {
    return this.openSessions.size;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    if (!address || typeof address === 'string') throw new Error('no TCP address');
    this.url = `https://127.0.0.1:${address.port}`;
    return this;
  }

  /** The device uninstalled the app: 410 Unregistered from now on. */
  unregister(deviceToken: string, at = this.now()): void {
    this.unregistered.set(deviceToken, at);
  }

  /** The next answers for a device token ('*' for any), consumed in order before the normal checks. */
  script(deviceToken: string, ...answers: ApnsAnswer[]): void {
    this.scripted.set(deviceToken, [...(this.scripted.get(deviceToken) ?? []), ...answers]);
  }

  /** Provider tokens issued before this time (seconds) are answered ExpiredProviderToken. */
  expireTokensIssuedBefore(seconds: number): void {
    this.revokedBefore = seconds;
  }

  /** Sends GOAWAY on every open session and closes it (a gateway restart). */
  async goAway(): Promise<void> {
    await Promise.all(
      [...this.openSessions].map(
        (s) =>
          new Promise<void>((resolve) => {
            s.goaway(http2.constants.NGHTTP2_NO_ERROR);
            s.close(() => resolve());
          }),
      ),
    );
  }

  async close(): Promise<void> {
    for (const s of this.openSessions) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  private async handle(stream: http2.ServerHttp2Stream, h: http2.IncomingHttpHeaders, rawPayload: string): Promise<void> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(h)) if (typeof value === 'string') headers[name] = value;
    const apnsId = headers['apns-id'] ?? randomUUID().toUpperCase();
    const match = /^\/3\/device\/([^/?]+)$/.exec(headers[':path'] ?? '');
    const deviceToken = match ? decodeURIComponent(match[1]) : '';
    let payload: Record<string, unknown> = {};
    const record: ApnsPeerRequest = { deviceToken, headers, payload, rawPayload, session: this.sessionIds.get(stream.session as http2.ServerHttp2Session) ?? 0, answer: { status: 0, apnsId } };

    const answer = (a: ApnsAnswer) => {
      record.answer = { ...a, apnsId };
      this.requests.push(record);
      stream.respond({ ':status': a.status, 'apns-id': apnsId, ...(a.status === 200 ? {} : { 'content-type': 'application/json' }) });
      stream.end(a.status === 200 ? undefined : JSON.stringify({ reason: a.reason, ...(a.timestamp !== undefined ? { timestamp: a.timestamp } : {}) }));
    };

    if (headers[':method'] !== 'POST') return answer({ status: 405, reason: 'MethodNotAllowed' });
    if (!match) return answer({ status: 404, reason: 'BadPath' });

    // Provider token: ES256 over {alg, kid} {iss, iat}, signed by the registered key.
    const auth = /^bearer (.+)$/i.exec(headers.authorization ?? '');
    if (!auth) return answer({ status: 403, reason: 'MissingProviderToken' });
    record.jwt = auth[1];
    try {
      record.jwtHeader = decodeProtectedHeader(auth[1]);
      const { payload: claims } = await jwtVerify(auth[1], this.options.publicKey as CryptoKey, { algorithms: ['ES256'], currentDate: new Date(this.now()) });
      record.jwtClaims = claims;
    } catch {
      return answer({ status: 403, reason: 'InvalidProviderToken' });
    }
    const claims = record.jwtClaims;
    if (record.jwtHeader.kid !== this.options.keyId || claims.iss !== this.options.teamId || typeof claims.iat !== 'number') {
      return answer({ status: 403, reason: 'InvalidProviderToken' });
    }
    const nowSeconds = Math.floor(this.now() / 1000);
    if (nowSeconds - claims.iat > 3600 || claims.iat < this.revokedBefore) return answer({ status: 403, reason: 'ExpiredProviderToken' });

    const scripted = this.scripted.get(deviceToken)?.shift() ?? this.scripted.get('*')?.shift();
    if (scripted) return answer(scripted);

    const topic = headers['apns-topic'];
    if (!topic) return answer({ status: 400, reason: 'MissingTopic' });
    if (topic !== this.options.topic) return answer({ status: 400, reason: 'DeviceTokenNotForTopic' });
    const pushType = headers['apns-push-type'];
    if (pushType !== undefined && !PUSH_TYPES.has(pushType)) return answer({ status: 400, reason: 'InvalidPushType' });
    const priority = headers['apns-priority'];
    if (priority !== undefined && !['1', '5', '10'].includes(priority)) return answer({ status: 400, reason: 'BadPriority' });
    if (pushType === 'background' && priority === '10') return answer({ status: 400, reason: 'BadPriority' });
    if (headers['apns-expiration'] !== undefined && !/^\d+$/.test(headers['apns-expiration'])) return answer({ status: 400, reason: 'BadExpirationDate' });
    if (headers['apns-collapse-id'] !== undefined && Buffer.byteLength(headers['apns-collapse-id']) > 64) return answer({ status: 400, reason: 'BadCollapseId' });

    if (rawPayload.length === 0) return answer({ status: 400, reason: 'PayloadEmpty' });
    if (Buffer.byteLength(rawPayload) > 4096) return answer({ status: 413, reason: 'PayloadTooLarge' });
    try {
      payload = JSON.parse(rawPayload) as Record<string, unknown>;
      record.payload = payload;
    } catch {
      return answer({ status: 400, reason: 'PayloadEmpty' });
    }
    if (typeof payload !== 'object' || payload === null || typeof payload.aps !== 'object') return answer({ status: 400, reason: 'PayloadEmpty' });

    if (!/^[0-9a-fA-F]{64,200}$/.test(deviceToken)) return answer({ status: 400, reason: 'BadDeviceToken' });
    const goneAt = this.unregistered.get(deviceToken);
    if (goneAt !== undefined) return answer({ status: 410, reason: 'Unregistered', timestamp: goneAt });
    return answer({ status: 200 });
  }
}

export async function startApnsPeer(options: ApnsPeerOptions): Promise<ApnsPeer> {
  return new ApnsPeer(options).start();
}

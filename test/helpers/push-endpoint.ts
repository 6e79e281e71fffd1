import { execFileSync } from 'node:child_process';
import { type ECDH, createECDH, createPublicKey, randomBytes, randomUUID, verify } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

/**
 * A push service (RFC 8030) on loopback that checks what a real one checks: the VAPID JWT
 * (RFC 8292: ES256 over the `k=` key, `aud` = this origin, `exp` in the future and within 24 h,
 * a `sub`), `Content-Encoding: aes128gcm`, `TTL` and `Urgency`; it decrypts the payload with the
 * test browser's subscription keys (RFC 8291) and can be told to answer 404/410/429/5xx.
 */

const ece = createRequire(import.meta.url)('http_ece') as {
  decrypt(buffer: Buffer, params: { version: 'aes128gcm'; privateKey: ECDH; authSecret: Buffer }): Buffer;
};

/** A browser's push subscription, with the private half the browser keeps. */
export interface TestSubscription {
  id: string;
  sub: { endpoint: string; keys: { p256dh: string; auth: string } };
  ecdh: ECDH;
  auth: Buffer;
}

export interface JwtClaims {
  aud: string;
  exp: number;
  sub: string;
}

export interface ReceivedPush {
  subscriptionId: string;
  /** Decrypted payload (undefined when decryption was skipped for this request). */
  payload?: Buffer;
  json(): unknown;
  /** The VAPID JWT (`t=`) and key (`k=`). */
  jwt: string;
  vapidKey: string;
  claims: JwtClaims;
  ttl: number;
  urgency: string;
  topic?: string;
  /** The status this request was answered with. */
  status: number;
}

export interface PushRejection {
  status: number;
  reason: string;
  subscriptionId?: string;
}

export interface PushEndpointOptions {
  /** Serve https with a self-signed certificate for 127.0.0.1 (`ca` on the endpoint). */
  tls?: boolean;
  /** Decrypt one request in this many (1: every one, the default; 0: none). */
  decryptEvery?: number;
  /** Seconds since the epoch, for checking exp; default the real time. */
  now?: () => number;
}

export interface PushEndpoint {
  origin: string;
  /** The certificate to trust with `tls`. */
  ca?: string;
  /** Requests that passed the protocol checks, whatever they were answered (201, or a scripted status). */
  received: ReceivedPush[];
  /** Requests refused for a protocol error. */
  rejected: PushRejection[];
  subscribe(): TestSubscription;
  /** Answer the next `times` (default: every) pushes to this subscription with `status`. */
  answer(subscription: TestSubscription | string, status: number, options?: { times?: number; retryAfter?: string }): void;
  /** Accepted (201) pushes, once there are at least `count`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedPush[]>;
  accepted(): ReceivedPush[];
  close(): Promise<void>;
}

const URGENCIES = new Set(['very-low', 'low', 'normal', 'high']);

let certificate: { key: string; cert: string } | undefined;

/** A throwaway self-signed certificate for 127.0.0.1 and localhost (openssl, once per process). */
export function selfSignedCertificate(): { key: string; cert: string } {
  if (certificate) return certificate;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'push-endpoint-'));
  try {
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', '/CN=localhost',
        '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')],
      { stdio: 'ignore' },
    );
    certificate = { key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8'), cert: fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8') };
    return certificate;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function verifyVapid(authorization: string | undefined, origin: string, nowSeconds: number, cache: Map<string, JwtClaims>): { jwt: string; vapidKey: string; claims: JwtClaims } {
  const match = /^vapid\s+t=([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+),\s*k=([A-Za-z0-9_-]+)$/.exec(authorization ?? '');
  if (!match) throw new Error(`Authorization is not "vapid t=<jwt>, k=<key>": ${String(authorization).slice(0, 80)}`);
  const [, jwt, vapidKey] = match as unknown as [string, string, string];
  let claims = cache.get(`${jwt} ${vapidKey}`);
  if (!claims) {
    const [h, p, s] = jwt.split('.') as [string, string, string];
    const header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as { alg?: string; typ?: string };
    if (header.alg !== 'ES256') throw new Error(`JWT alg is ${header.alg}, not ES256`);
    const point = Buffer.from(vapidKey, 'base64url');
    if (point.length !== 65 || point[0] !== 4) throw new Error('k= is not an uncompressed P-256 point');
    const key = createPublicKey({ format: 'jwk', key: { kty: 'EC', crv: 'P-256', x: point.subarray(1, 33).toString('base64url'), y: point.subarray(33).toString('base64url') } });
    if (!verify('sha256', Buffer.from(`${h}.${p}`), { key, dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'))) {
      throw new Error('JWT signature does not verify with the k= key');
    }
    claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as JwtClaims;
    cache.set(`${jwt} ${vapidKey}`, claims);
  }
  if (claims.aud !== origin) throw new Error(`JWT aud is ${claims.aud}, not this push service (${origin})`);
  if (typeof claims.exp !== 'number' || claims.exp <= nowSeconds) throw new Error('JWT has expired');
  if (claims.exp > nowSeconds + 24 * 3600) throw new Error('JWT exp is more than 24 hours ahead');
  if (typeof claims.sub !== 'string' || !/^(mailto:|https:)/.test(claims.sub)) throw new Error('JWT sub is not a mailto: or https: contact');
  return { jwt, vapidKey, claims };
}

export async function startPushEndpoint(options: PushEndpointOptions = {}): Promise<PushEndpoint> {
  const tls = options.tls ? selfSignedCertificate() : undefined;
  const decryptEvery = options.decryptEvery ?? 1;
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const subscriptions = new Map<string, TestSubscription>();
  const scripts = new Map<string, { status: number; times: number; retryAfter?: string }[]>();
  const received: ReceivedPush[] = [];
  const rejected: PushRejection[] = [];
  const verified = new Map<string, JwtClaims>();
  const waiters = new Set<() => void>();
  let origin = '';
  let count = 0;

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const refuse = (status: number, reason: string, subscriptionId?: string) => {
        rejected.push({ status, reason, ...(subscriptionId ? { subscriptionId } : {}) });
        res.writeHead(status, { 'content-type': 'text/plain' }).end(reason);
      };
      const id = /^\/push\/([^/?]+)$/.exec(req.url ?? '')?.[1];
      const subscription = id ? subscriptions.get(id) : undefined;
      if (req.method !== 'POST') return refuse(405, 'push messages are POSTed');
      if (!subscription) return refuse(404, 'no such subscription');
      let vapid: ReturnType<typeof verifyVapid>;
      try {
        vapid = verifyVapid(req.headers.authorization, origin, now(), verified);
      } catch (err) {
        return refuse(401, (err as Error).message, subscription.id);
      }
      if (req.headers['content-encoding'] !== 'aes128gcm') return refuse(415, `Content-Encoding must be aes128gcm, got ${req.headers['content-encoding']}`, subscription.id);
      const ttlHeader = req.headers.ttl;
      if (typeof ttlHeader !== 'string' || !/^\d+$/.test(ttlHeader)) return refuse(400, 'TTL header missing or not a non-negative integer', subscription.id);
      const urgency = req.headers.urgency ?? 'normal';
      if (typeof urgency !== 'string' || !URGENCIES.has(urgency)) return refuse(400, `Urgency ${String(urgency)} is not very-low, low, normal or high`, subscription.id);
      const topic = typeof req.headers.topic === 'string' ? req.headers.topic : undefined;
      if (topic !== undefined && !/^[A-Za-z0-9_-]{1,32}$/.test(topic)) return refuse(400, 'Topic must be at most 32 base64url characters', subscription.id);
      const body = Buffer.concat(chunks);
      if (body.length > 4096) return refuse(413, 'payload over 4096 bytes');
      let payload: Buffer | undefined;
      count++;
      if (decryptEvery > 0 && count % decryptEvery === 0) {
        try {
          payload = ece.decrypt(body, { version: 'aes128gcm', privateKey: subscription.ecdh, authSecret: subscription.auth });
        } catch (err) {
          return refuse(400, `payload does not decrypt: ${(err as Error).message}`, subscription.id);
        }
      }
      const script = scripts.get(subscription.id)?.[0];
      let status = 201;
      const headers: Record<string, string> = {};
      if (script) {
        status = script.status;
        if (script.retryAfter !== undefined) headers['retry-after'] = script.retryAfter;
        if (--script.times <= 0) scripts.get(subscription.id)!.shift();
      } else headers.location = `${origin}/message/${randomUUID()}`;
      received.push({
        subscriptionId: subscription.id,
        payload,
        json: () => (payload ? JSON.parse(payload.toString('utf8')) : undefined),
        jwt: vapid.jwt,
        vapidKey: vapid.vapidKey,
        claims: vapid.claims,
        ttl: Number(ttlHeader),
        urgency,
        ...(topic ? { topic } : {}),
        status,
      });
      res.writeHead(status, headers).end(status === 201 ? '' : `scripted ${status}`);
      for (const wake of waiters) wake();
    });
  };

  const server = tls ? https.createServer({ key: tls.key, cert: tls.cert }, handler) : http.createServer(handler);
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const accepted = () => received.filter((r) => r.status === 201);
  return {
    origin,
    ...(tls ? { ca: tls.cert } : {}),
    received,
    rejected,
    accepted,
    subscribe() {
      const ecdh = createECDH('prime256v1');
      ecdh.generateKeys();
      const auth = randomBytes(16);
      const id = randomUUID();
      const subscription: TestSubscription = {
        id,
        sub: { endpoint: `${origin}/push/${id}`, keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: auth.toString('base64url') } },
        ecdh,
        auth,
      };
      subscriptions.set(id, subscription);
      return subscription;
    },
    answer(subscription, status, answerOptions = {}) {
      const id = typeof subscription === 'string' ? subscription : subscription.id;
      const list = scripts.get(id) ?? [];
      list.push({ status, times: answerOptions.times ?? Number.POSITIVE_INFINITY, ...(answerOptions.retryAfter !== undefined ? { retryAfter: answerOptions.retryAfter } : {}) });
      scripts.set(id, list);
    },
    waitFor(wanted, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (accepted().length < wanted) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(accepted());
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`push endpoint: ${accepted().length} of ${wanted} pushes accepted; rejected: ${JSON.stringify(rejected.slice(-3))}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

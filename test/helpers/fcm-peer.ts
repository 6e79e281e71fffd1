import { type KeyObject, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { jwtVerify } from 'jose';

/**
 * The far end of FCM HTTP v1 over loopback: Google's OAuth2 token endpoint (JWT-bearer grant,
 * RS256 assertion verified against the service account's public key) and the
 * `v1/projects/{project}/messages:send` endpoint (bearer token, project, strict message body,
 * the 4096-byte payload limit, google.rpc.Status error bodies with FcmError codes).
 */

export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

export type FcmFailure =
  | 'UNREGISTERED'
  | 'INVALID_ARGUMENT'
  | 'QUOTA_EXCEEDED'
  | 'INTERNAL'
  | 'UNAVAILABLE'
  | 'UNAUTHENTICATED'
  | 'SENDER_ID_MISMATCH'
  | 'THIRD_PARTY_AUTH_ERROR';

export interface TokenRequest {
  claims: Record<string, unknown>;
  header: Record<string, unknown>;
  accessToken: string;
}

export interface ReceivedSend {
  project: string;
  accessToken: string;
  body: { message: Record<string, unknown> } & Record<string, unknown>;
  /** What the peer answered. */
  status: number;
  name?: string;
}

export interface FcmPeerOptions {
  /** The service account's public key (SPKI PEM or KeyObject) the assertions must verify against. */
  publicKey: string | KeyObject;
  projectId?: string;
  clientEmail?: string;
  /** expires_in of issued access tokens, seconds; default 3599 as Google. */
  expiresIn?: number;
  /** The peer's clock (exp/iat checks, access-token expiry); default the system clock. */
  now?: () => Date;
}

export interface FcmPeer {
  url: string;
  tokenUri: string;
  projectId: string;
  clientEmail: string;
  /** Token requests the peer granted, in order. */
  tokenRequests: TokenRequest[];
  /** Token requests refused, with the reason. */
  refusedTokenRequests: string[];
  /** Every authenticated send request, answered or failed. */
  sends: ReceivedSend[];
  /** Sends refused for a missing, unknown, expired or revoked access token. */
  unauthenticated: number;
  /** Answers sends to `deviceToken` with `failure` (`times` times, default always). */
  fail(deviceToken: string, failure: FcmFailure, options?: { retryAfter?: string; times?: number }): void;
  /** Forgets a failure set with fail(). */
  heal(deviceToken: string): void;
  /** Makes every access token issued so far invalid (a 401 on its next use). */
  revokeAccessTokens(): void;
  /** A service-account key file for this peer, with the given private key. */
  serviceAccount(privateKeyPem: string, extra?: Record<string, unknown>): Record<string, unknown>;
  close(): Promise<void>;
}

const GOOGLE_STATUS: Record<FcmFailure, { http: number; status: string; message: string }> = {
  UNREGISTERED: { http: 404, status: 'NOT_FOUND', message: 'Requested entity was not found.' },
  INVALID_ARGUMENT: { http: 400, status: 'INVALID_ARGUMENT', message: 'The registration token is not a valid FCM registration token' },
  QUOTA_EXCEEDED: { http: 429, status: 'RESOURCE_EXHAUSTED', message: 'Quota exceeded for quota metric of service fcm.googleapis.com.' },
  INTERNAL: { http: 500, status: 'INTERNAL', message: 'Internal error encountered.' },
  UNAVAILABLE: { http: 503, status: 'UNAVAILABLE', message: 'The service is currently unavailable.' },
  UNAUTHENTICATED: {
    http: 401,
    status: 'UNAUTHENTICATED',
    message: 'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
  },
  SENDER_ID_MISMATCH: { http: 403, status: 'PERMISSION_DENIED', message: 'SenderId mismatch' },
  THIRD_PARTY_AUTH_ERROR: { http: 401, status: 'UNAUTHENTICATED', message: 'Auth error from APNS or Web Push Service' },
};

const FCM_ERROR = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
const BAD_REQUEST = 'type.googleapis.com/google.rpc.BadRequest';

function errorBody(failure: FcmFailure, extra: { field?: string; description?: string; message?: string; noFieldViolations?: boolean } = {}) {
  const s = GOOGLE_STATUS[failure];
  const details: unknown[] = [];
  // Google sends no FcmError detail for a plain UNAUTHENTICATED.
  if (failure !== 'UNAUTHENTICATED') details.push({ '@type': FCM_ERROR, errorCode: failure });
  if (failure === 'INVALID_ARGUMENT') {
    const violations = extra.noFieldViolations ? {} : { fieldViolations: [{ field: extra.field ?? 'message.token', description: extra.description ?? 'Invalid registration token' }] };
    details.push({ '@type': BAD_REQUEST, ...violations });
  }
  return { error: { code: s.http, message: extra.message ?? s.message, status: s.status, ...(details.length ? { details } : {}) } };
}

/** A fresh RSA key pair as Google issues for a service account (PKCS#8 private key). */
export function generateServiceAccountKeys(): { privateKey: string; publicKey: string } {
  return generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
}

/**
 * FCM's documented payload limit ("Maximum payload for both message types is 4096 bytes").
 * Google does not say which bytes it counts; the peer counts the payload a device receives, the
 * JSON of notification and data.
 */
export const FCM_PEER_MAX_PAYLOAD_BYTES = 4096;

/** The bytes of a received message that count toward FCM_PEER_MAX_PAYLOAD_BYTES. */
export function receivedPayloadBytes(message: Record<string, unknown>): number {
  return Buffer.byteLength(JSON.stringify({ notification: message.notification, ...(message.data !== undefined ? { data: message.data } : {}) }));
}

const MESSAGE_FIELDS = new Set(['token', 'notification', 'data', 'android', 'apns', 'webpush', 'fcm_options', 'name', 'topic', 'condition']);
const ANDROID_FIELDS = new Set(['collapse_key', 'priority', 'ttl', 'restricted_package_name', 'data', 'notification', 'fcm_options', 'direct_boot_ok']);
const APNS_FIELDS = new Set(['headers', 'payload', 'fcm_options', 'live_activity_token']);
const RESERVED_DATA = /^(from|notification|message_type)$|^(google|gcm)/;

/** Checks a messages:send body as FCM does; returns the offending field and why, or undefined. */
function invalidField(body: unknown): { field: string; description: string } | undefined {
  if (!body || typeof body !== 'object') return { field: '', description: 'Invalid JSON payload received.' };
  const keys = Object.keys(body);
  const unknownTop = keys.find((k) => k !== 'message' && k !== 'validate_only');
  if (unknownTop) return { field: unknownTop, description: `Invalid JSON payload received. Unknown name "${unknownTop}": Cannot find field.` };
  const m = (body as { message?: unknown }).message;
  if (!m || typeof m !== 'object') return { field: 'message', description: 'message is required' };
  const message = m as Record<string, unknown>;
  for (const k of Object.keys(message)) {
    if (!MESSAGE_FIELDS.has(k)) return { field: `message.${k}`, description: `Invalid JSON payload received. Unknown name "${k}" at 'message'` };
  }
  if (typeof message.token !== 'string' || !message.token) return { field: 'message.token', description: 'Invalid registration token' };
  if (message.notification !== undefined) {
    const n = message.notification as Record<string, unknown>;
    for (const k of Object.keys(n)) {
      if (!['title', 'body', 'image'].includes(k) || typeof n[k] !== 'string') return { field: `message.notification.${k}`, description: 'Invalid value' };
    }
  }
  if (message.data !== undefined) {
    const d = message.data as Record<string, unknown>;
    for (const [k, v] of Object.entries(d)) {
      if (typeof v !== 'string') return { field: `message.data[${k}]`, description: 'Invalid value: data values must be strings' };
      if (RESERVED_DATA.test(k)) return { field: `message.data[${k}]`, description: `Invalid data payload key: ${k}` };
    }
  }
  if (message.android !== undefined) {
    const a = message.android as Record<string, unknown>;
    for (const k of Object.keys(a)) {
      if (!ANDROID_FIELDS.has(k)) return { field: `message.android.${k}`, description: `Unknown name "${k}"` };
    }
    if (a.priority !== undefined && a.priority !== 'HIGH' && a.priority !== 'NORMAL') return { field: 'message.android.priority', description: 'Invalid value' };
    if (a.ttl !== undefined && !(typeof a.ttl === 'string' && /^\d+(\.\d{1,9})?s$/.test(a.ttl))) return { field: 'message.android.ttl', description: 'Invalid duration' };
    for (const k of ['collapse_key', 'restricted_package_name']) {
      if (a[k] !== undefined && typeof a[k] !== 'string') return { field: `message.android.${k}`, description: 'Invalid value' };
    }
  }
  if (message.apns !== undefined) return invalidApns(message.apns as Record<string, unknown>);
  return undefined;
}

/** The apns part: APNs headers as strings (FCM passes them on; APNs refuses a bad expiration or priority), a payload with an aps dictionary. */
function invalidApns(apns: Record<string, unknown>): { field: string; description: string } | undefined {
  for (const k of Object.keys(apns)) if (!APNS_FIELDS.has(k)) return { field: `message.apns.${k}`, description: `Unknown name "${k}"` };
  const headers = (apns.headers ?? {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(headers)) if (typeof v !== 'string') return { field: `message.apns.headers[${k}]`, description: 'Invalid value: header values must be strings' };
  if (headers['apns-expiration'] !== undefined && !/^\d+$/.test(headers['apns-expiration'] as string)) return { field: 'message.apns.headers', description: 'Invalid apns-expiration' };
  if (headers['apns-priority'] !== undefined && !['1', '5', '10'].includes(headers['apns-priority'] as string)) return { field: 'message.apns.headers', description: 'Invalid apns-priority' };
  if (apns.payload !== undefined) {
    const aps = (apns.payload as { aps?: unknown }).aps;
    if (!aps || typeof aps !== 'object') return { field: 'message.apns.payload', description: 'Invalid APNs payload: aps dictionary missing' };
  }
  return undefined;
}

export async function startFcmPeer(options: FcmPeerOptions): Promise<FcmPeer> {
  const publicKey = typeof options.publicKey === 'string' ? createPublicKey(options.publicKey) : options.publicKey;
  const projectId = options.projectId ?? 'clarion-test-project';
  const clientEmail = options.clientEmail ?? `firebase-adminsdk-test@${projectId}.iam.gserviceaccount.com`;
  const now = options.now ?? (() => new Date());
  const issued = new Map<string, { expiresAt: number; revoked: boolean }>();
  const failures = new Map<string, { failure: FcmFailure; retryAfter?: string; remaining: number }>();
  let counter = 0;

  const read = (req: http.IncomingMessage) =>
    new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });
  const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', ...headers });
    res.end(JSON.stringify(body));
  };

  const peer: FcmPeer = {
    url: '',
    tokenUri: '',
    projectId,
    clientEmail,
    tokenRequests: [],
    refusedTokenRequests: [],
    sends: [],
    unauthenticated: 0,
    fail(deviceToken, failure, opts = {}) {
      failures.set(deviceToken, { failure, retryAfter: opts.retryAfter, remaining: opts.times ?? Infinity });
    },
    heal(deviceToken) {
      failures.delete(deviceToken);
    },
    revokeAccessTokens() {
      for (const t of issued.values()) t.revoked = true;
    },
    serviceAccount(privateKeyPem, extra = {}) {
      return {
        type: 'service_account',
        project_id: projectId,
        private_key_id: randomBytes(20).toString('hex'),
        private_key: privateKeyPem,
        client_email: clientEmail,
        client_id: '100000000000000000001',
        auth_uri: 'https://accounts.google.com/o/oauth2/auth',
        token_uri: peer.tokenUri,
        auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
        client_x509_cert_url: `https://www.googleapis.com/robot/v1/metadata/x509/${encodeURIComponent(clientEmail)}`,
        universe_domain: 'googleapis.com',
        ...extra,
      };
    },
    close: async () => {},
  };

  async function token(req: http.IncomingMessage, res: http.ServerResponse) {
    const refuse = (description: string) => {
      peer.refusedTokenRequests.push(description);
      json(res, 400, { error: 'invalid_grant', error_description: description });
    };
    if (!String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) return refuse('Bad content type');
    const form = new URLSearchParams(await read(req));
    if (form.get('grant_type') !== JWT_BEARER) return refuse('Invalid grant_type');
    const assertion = form.get('assertion');
    if (!assertion) return refuse('Missing assertion');
    try {
      const { payload, protectedHeader } = await jwtVerify(assertion, publicKey, {
        algorithms: ['RS256'],
        issuer: clientEmail,
        audience: peer.tokenUri,
        currentDate: now(),
        requiredClaims: ['iat', 'exp'],
      });
      if (payload.scope !== FCM_SCOPE) return refuse(`Invalid scope: ${String(payload.scope)}`);
      if (payload.exp! - payload.iat! > 3600) return refuse('Invalid JWT: Token must be a short-lived token (60 minutes)');
      if (payload.iat! * 1000 > now().getTime() + 60_000) return refuse('Invalid JWT: iat is in the future');
      const accessToken = `ya29.peer-${++counter}-${randomBytes(8).toString('hex')}`;
      const expiresIn = options.expiresIn ?? 3599;
      issued.set(accessToken, { expiresAt: now().getTime() + expiresIn * 1000, revoked: false });
      peer.tokenRequests.push({ claims: payload, header: protectedHeader, accessToken });
      json(res, 200, { access_token: accessToken, expires_in: expiresIn, token_type: 'Bearer' });
    } catch (err) {
      refuse(`Invalid JWT Signature or claims: ${(err as Error).message}`);
    }
  }

  async function send(req: http.IncomingMessage, res: http.ServerResponse, project: string) {
    const text = await read(req);
    const auth = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ''));
    const grant = auth ? issued.get(auth[1]) : undefined;
    if (!auth || !grant || grant.revoked || grant.expiresAt <= now().getTime()) {
      peer.unauthenticated++;
      return json(res, 401, errorBody('UNAUTHENTICATED'), { 'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"' });
    }
    let body: ReceivedSend['body'];
    try {
      body = JSON.parse(text);
    } catch {
      return json(res, 400, errorBody('INVALID_ARGUMENT', { field: '', description: 'Invalid JSON payload received.', message: 'Invalid JSON payload received.' }));
    }
    const record: ReceivedSend = { project, accessToken: auth[1], body, status: 0 };
    peer.sends.push(record);
    const answer = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      record.status = status;
      json(res, status, payload, headers);
    };
    if (project !== projectId) {
      return answer(403, { error: { code: 403, message: `Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/${project}'`, status: 'PERMISSION_DENIED' } });
    }
    const bad = invalidField(body);
    if (bad) return answer(400, errorBody('INVALID_ARGUMENT', { ...bad, message: bad.description }));
    // What FCM answers a message over its limit (a BadRequest detail without field violations).
    if (receivedPayloadBytes(body.message) > FCM_PEER_MAX_PAYLOAD_BYTES) return answer(400, errorBody('INVALID_ARGUMENT', { message: 'Android message is too big', noFieldViolations: true }));
    const deviceToken = String(body.message.token);
    const failure = failures.get(deviceToken);
    if (failure && failure.remaining > 0) {
      failure.remaining--;
      return answer(GOOGLE_STATUS[failure.failure].http, errorBody(failure.failure), failure.retryAfter ? { 'retry-after': failure.retryAfter } : {});
    }
    record.name = `projects/${projectId}/messages/0:${Date.now()}%${randomBytes(8).toString('hex')}`;
    answer(200, { name: record.name });
  }

  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const handle = async () => {
      if (req.method === 'POST' && path === '/token') return token(req, res);
      const m = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(path);
      if (req.method === 'POST' && m) return send(req, res, decodeURIComponent(m[1]));
      json(res, 404, { error: { code: 404, message: 'Not Found', status: 'NOT_FOUND' } });
    };
    handle().catch((err) => json(res, 500, { error: { code: 500, message: String(err), status: 'INTERNAL' } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  peer.url = `http://127.0.0.1:${port}`;
  peer.tokenUri = `${peer.url}/token`;
  peer.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return peer;
}

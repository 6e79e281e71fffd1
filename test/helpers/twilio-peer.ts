import { twilioSignature } from '../../src/channels/telephony/signature.js';
import { listFilter, listPage as twilioListPage } from '../../src/local-providers/dev-carrier/rest-list.js';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One REST call the peer received, with its form body decoded (repeated keys as arrays). */
export interface PeerRequest {
  method: string;
  path: string;
  resource: 'Messages' | 'Calls' | 'IncomingPhoneNumbers' | 'AvailablePhoneNumbers' | 'other';
  params: Record<string, string | string[]>;
  authorized: boolean;
}

/** An AvailablePhoneNumber resource as Twilio answers it. */
export interface AvailableNumber {
  phone_number: string;
  friendly_name: string;
  locality: string | null;
  region: string | null;
  iso_country: string;
  capabilities: { sms: boolean; mms: boolean; voice: boolean };
}

export interface PeerFailure {
  status: number;
  body?: Record<string, unknown>;
  headers?: Record<string, string>;
}

/**
 * How the peer loses the answer to a create: answers a failure (a 5xx, say), never answers
 * (`hang`: the client's timeout ends it), or closes the connection without an answer (`drop`).
 * The Message or Call is made first, as at Twilio when its answer is lost, unless `created` is false.
 */
export type LostAnswer = ({ after: 'hang' } | { after: 'drop' } | { after: 'fail'; failure: PeerFailure }) & { created?: false };

export interface TwilioPeer {
  url: string;
  accountSid: string;
  authToken: string;
  requests: PeerRequest[];
  /** Created messages and calls by sid (their resources, as the peer answers GET). */
  resources: Map<string, Record<string, unknown>>;
  /** Numbers IncomingPhoneNumbers.json lists (each with sid `PN<digits>`); DELETE IncomingPhoneNumbers/{sid}.json removes one. */
  ownedNumbers: Set<string>;
  /** Twilio's stock, as AvailablePhoneNumbers/{CountryCode}/Local.json searches it (a country without stock is a 404). */
  stock: AvailableNumber[];
  /** The next POSTs to Messages/Calls answer these, in order (then success again). */
  failNext(...failures: PeerFailure[]): void;
  /** The next POSTs to Messages/Calls (after those failNext fails) create their resource and then lose the answer so, in order (then answer again). */
  createThenLoseNext(...answers: LostAnswer[]): void;
  /** The next GETs of the Messages/Calls lists answer these, in order (then the page again). */
  failListNext(...failures: PeerFailure[]): void;
  /** Waits until `n` Messages/Calls POSTs were accepted. */
  waitForCreated(n: number, timeoutMs?: number): Promise<PeerRequest[]>;
  close(): Promise<void>;
}

function parseForm(body: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of new URLSearchParams(body)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/**
 * A Twilio REST API peer on loopback: checks Basic AccountSid:AuthToken, reads form bodies the way
 * Twilio does, answers Twilio's JSON resources and error documents, and can be told to fail.
 */
export async function startTwilioPeer(options: { accountSid?: string; authToken?: string } = {}): Promise<TwilioPeer> {
  const accountSid = options.accountSid ?? `AC${randomBytes(16).toString('hex')}`;
  const authToken = options.authToken ?? randomBytes(16).toString('hex');
  const requests: PeerRequest[] = [];
  const resources = new Map<string, Record<string, unknown>>();
  const ownedNumbers = new Set<string>();
  const stock: AvailableNumber[] = [];
  const failures: PeerFailure[] = [];
  const lostAnswers: LostAnswer[] = [];
  const listFailures: PeerFailure[] = [];
  const created: PeerRequest[] = [];
  const waiters: (() => void)[] = [];

  const server = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (raw += c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://peer');
      const expected = `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}`;
      const match = /^\/2010-04-01\/Accounts\/([^/]+)\/(Messages|Calls|IncomingPhoneNumbers)(?:\/([^/]+))?\.json$/.exec(url.pathname);
      const search = /^\/2010-04-01\/Accounts\/([^/]+)\/AvailablePhoneNumbers\/([A-Z]{2})\/Local\.json$/.exec(url.pathname);
      const entry: PeerRequest = {
        method: req.method ?? '',
        path: url.pathname + url.search,
        resource: search ? 'AvailablePhoneNumbers' : ((match?.[2] as PeerRequest['resource']) ?? 'other'),
        params: req.method === 'POST' ? parseForm(raw) : Object.fromEntries(url.searchParams),
        authorized: req.headers.authorization === expected,
      };
      requests.push(entry);
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      const loseAnswer = (lost: LostAnswer) => {
        if (lost.after === 'drop') req.socket.destroy();
        else if (lost.after === 'fail') send(lost.failure.status, lost.failure.body ?? {}, lost.failure.headers);
        // hang: no answer at all; close() ends the connection.
      };
      const error = (status: number, code: number, message: string) => send(status, { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status });
      if (!entry.authorized) return error(401, 20003, 'Authenticate');
      if (search && search[1] === accountSid && req.method === 'GET') {
        if (!stock.some((n) => n.iso_country === search[2])) return error(404, 20404, `The requested resource ${url.pathname} was not found`);
        return send(200, availablePage(url, search[2]));
      }
      if (!match || match[1] !== accountSid) return error(404, 20404, 'The requested resource was not found');
      const [, , resource, sid] = match;
      if (req.method === 'GET' && resource === 'IncomingPhoneNumbers') {
        const wanted = url.searchParams.get('PhoneNumber');
        return send(200, { incoming_phone_numbers: [...ownedNumbers].filter((n) => !wanted || n === wanted).map((n) => ({ phone_number: n, sid: `PN${n.slice(1)}` })) });
      }
      if (req.method === 'DELETE' && resource === 'IncomingPhoneNumbers' && sid) {
        const number = [...ownedNumbers].find((n) => `PN${n.slice(1)}` === sid);
        if (!number) return error(404, 20404, `The requested resource ${url.pathname} was not found`);
        ownedNumbers.delete(number);
        res.writeHead(204);
        return res.end();
      }
      if (req.method === 'GET' && !sid && (resource === 'Messages' || resource === 'Calls')) {
        const failure = listFailures.shift();
        if (failure) return send(failure.status, failure.body ?? {}, failure.headers);
        return send(200, listPage(url, resource));
      }
      if (req.method === 'GET' && sid) {
        const found = resources.get(sid);
        return found ? send(200, found) : error(404, 20404, `The requested resource ${sid} was not found`);
      }
      if (req.method !== 'POST' || sid) return error(405, 20004, 'Method not allowed');
      const failure = failures.shift();
      if (failure) return send(failure.status, failure.body ?? {}, failure.headers);
      const lost = lostAnswers.shift();
      if (lost?.created === false) return loseAnswer(lost);
      const p = entry.params;
      const isMessage = resource === 'Messages';
      const newSid = `${isMessage ? 'SM' : 'CA'}${randomBytes(16).toString('hex')}`;
      const media = ([] as string[]).concat(p.MediaUrl ?? []);
      // Queued: not sent (date_sent) nor started (start_time) yet, as Twilio answers a create.
      const common = { sid: newSid, account_sid: accountSid, status: 'queued', to: p.To, from: p.From, direction: 'outbound-api', date_created: rfc2822(new Date()), price: null, price_unit: 'USD' };
      const body: Record<string, unknown> = isMessage
        ? { ...common, body: p.Body ?? '', num_media: String(media.length), num_segments: '1', error_code: null, date_sent: null }
        : { ...common, duration: null, start_time: null };
      resources.set(newSid, body);
      created.push(entry);
      for (const w of waiters.splice(0)) w();
      return lost ? loseAnswer(lost) : send(201, body);
    });
  });
  /**
   * A page of AvailablePhoneNumbers as Twilio answers one: the stock of the country filtered by
   * AreaCode and the *Enabled capabilities, PageSize long (default 50).
   */
  function availablePage(url: URL, country: string): Record<string, unknown> {
    const q = url.searchParams;
    const size = Number(q.get('PageSize') ?? 50);
    const wanted = (flag: string) => q.get(flag) === 'true';
    const numbers = stock.filter(
      (n) =>
        n.iso_country === country &&
        (!q.get('AreaCode') || n.phone_number.startsWith(`+1${q.get('AreaCode')}`)) &&
        (!wanted('SmsEnabled') || n.capabilities.sms) &&
        (!wanted('MmsEnabled') || n.capabilities.mms) &&
        (!wanted('VoiceEnabled') || n.capabilities.voice),
    );
    return { available_phone_numbers: numbers.slice(0, size), uri: url.pathname + url.search, end: Math.min(size, numbers.length) - 1, page: 0, page_size: size, start: 0 };
  }

  /**
   * A page of the Messages or Calls list as Twilio answers one, newest first, with the filters and
   * page document of the development carrier's lists (src/local-providers/dev-carrier/rest-list.ts).
   */
  function listPage(url: URL, resource: 'Messages' | 'Calls'): Record<string, unknown> {
    const kind = resource === 'Messages' ? 'sms' : 'call';
    const filter = listFilter(kind, Object.fromEntries(url.searchParams));
    const prefix = resource === 'Messages' ? 'SM' : 'CA';
    const listed = [...resources.values()]
      .filter((r) => String(r.sid).startsWith(prefix) && (!filter.to || r.to === filter.to) && (!filter.from || r.from === filter.from) && filter.keeps(r))
      .reverse()
      .slice(0, filter.pageSize);
    return twilioListPage(kind, listed, url.pathname + url.search, filter.pageSize);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    accountSid,
    authToken,
    requests,
    resources,
    ownedNumbers,
    stock,
    failNext: (...f) => failures.push(...f),
    createThenLoseNext: (...a) => lostAnswers.push(...a),
    failListNext: (...f) => listFailures.push(...f),
    async waitForCreated(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (created.length < n) {
        if (Date.now() > deadline) throw new Error(`Twilio peer: ${created.length} of ${n} creations after ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return created.slice(0, n);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A date as Twilio writes it in resources (RFC 2822, GMT as +0000). */
function rfc2822(at: Date): string {
  return at.toUTCString().replace('GMT', '+0000');
}

/** POSTs `form` over real HTTP to a Twilio callback route of Clarion at `url`, signed as Twilio signs it with `authToken` (null: unsigned). */
export function postTwilioCallback(url: string, form: Record<string, string>, authToken: string | null): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(authToken ? { 'x-twilio-signature': twilioSignature(authToken, url, form) } : {}) },
    body: new URLSearchParams(form).toString(),
  });
}

/** The server configuration that points Clarion's Twilio client at `peer` (the development carrier off), sending from `defaultSmsFrom` when given. */
export function twilioPeerConfig(peer: TwilioPeer, defaultSmsFrom?: string) {
  return { twilioAccountSid: peer.accountSid, twilioAuthToken: peer.authToken, twilioBaseUrl: peer.url, devCarrier: false, ...(defaultSmsFrom ? { defaultSmsFrom } : {}) };
}

import { CALLBACK_PATHS, devCarrierCredentials, publicBase } from '../../channels/telephony/endpoint.js';
import { type FormParams, encodeForm, field, twilioSignature } from '../../channels/telephony/signature.js';
import { smsEncoding } from '../../channels/telephony/sms-content.js';
import { spokenText } from '../../channels/telephony/twiml.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { safeEqual } from '../../secrets.js';
import { DEV_CARRIER_SCOPE } from '../../modules/telephony/callbacks.service.js';
import type { NumbersService } from '../../modules/telephony/numbers.service.js';
import type { DevCarrierRow, TelephonyRepository } from '../../modules/telephony/telephony.repository.js';
import { normalizePhoneNumber } from '../../modules/users/users.validation.js';
import { LIST_MAX_PAGE_SIZE, type ListParams, listFilter, listPage } from './rest-list.js';

/**
 * The local development carrier: the far end of the Twilio REST protocol, built into Clarion
 * so SMS and calls work with no account anywhere. It is served by Clarion itself under
 * /dev-carrier (rather than by a loopback server the worker starts) because then every process
 * role reaches the same carrier at CLARION_PUBLIC_URL, a developer can read what it was given
 * from the same API, and no extra port has to be free. It speaks the real protocol both ways:
 * REST with Basic auth and form bodies in, X-Twilio-Signature-signed status callbacks out over
 * real HTTP, so the adapter and the verification of production run unchanged.
 *
 * Magic destination numbers choose an outcome (documented in README: SMS and calls):
 * +15005550001 invalid (21211), +15005550004 unsubscribed (21610), +15005550009 not a mobile
 * (21614); +15005550006 SMS undelivered (30003) / call no-answer; +15005550007 SMS failed
 * (30008) / call failed; +15005550008 call busy; +15005550005 call canceled.
 */

const REST_ERRORS: Record<string, { code: number; message: string }> = {
  '+15005550001': { code: 21211, message: "The 'To' number +15005550001 is not a valid phone number." },
  '+15005550004': { code: 21610, message: 'Attempt to send to unsubscribed recipient' },
  '+15005550009': { code: 21614, message: "'To' number is not a valid mobile number" },
};
const SMS_OUTCOMES: Record<string, { status: 'undelivered' | 'failed'; errorCode: number }> = {
  '+15005550006': { status: 'undelivered', errorCode: 30003 },
  '+15005550007': { status: 'failed', errorCode: 30008 },
};
const CALL_OUTCOMES: Record<string, string> = {
  '+15005550006': 'no-answer',
  '+15005550007': 'failed',
  '+15005550008': 'busy',
  '+15005550005': 'canceled',
};

const SMS_PRICE_PER_SEGMENT = 0.0079;
const MMS_PRICE = 0.02;
const CALL_PRICE_PER_MINUTE = 0.014;

export interface CarrierReply {
  status: number;
  body: Record<string, unknown>;
}

const twilioError = (status: number, code: number, message: string): CarrierReply => ({
  status,
  body: { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status },
});

const E164 = /^\+[1-9]\d{6,14}$/;
const rfc2822 = (iso: string) => new Date(iso).toUTCString().replace('GMT', '+0000');
const price = (usd: number) => (-usd).toFixed(5);

export interface DevCarrierMessageView {
  sid: string;
  direction: 'outbound' | 'inbound';
  from: string;
  to: string;
  body?: string;
  mediaUrls?: string[];
  spokenText?: string;
  status: string;
  errorCode?: number;
  segments?: number;
  durationSeconds?: number;
  price?: number;
  trackingId?: string;
  createdAt: string;
  updatedAt: string;
}

export class DevCarrier {
  private readonly credentials: { accountSid: string; authToken: string };
  /** Callback sequences under way, awaited at shutdown so none is cut mid-flight. */
  private readonly inFlight = new Set<Promise<void>>();

  /** `repo`: its records live in the telephony tables (dev_carrier_messages, migration 0060). */
  constructor(
    private readonly deps: Deps,
    private readonly numbers: NumbersService,
    private readonly repo: TelephonyRepository,
  ) {
    this.credentials = devCarrierCredentials(deps.secrets);
  }

  /** A Twilio sid's 32 hex digits, from the injected id source (a UUID without its dashes). */
  private sidDigits(): string {
    return this.deps.ids.uuid().replace(/-/g, '');
  }

  /** Basic AccountSid:AuthToken, and the path's account must be that account (as Twilio answers 20003 / 20404). */
  authenticate(authorization: string | undefined, pathSid: string): CarrierReply | null {
    const [scheme, encoded] = (authorization ?? '').split(' ');
    const decoded = scheme?.toLowerCase() === 'basic' && encoded ? Buffer.from(encoded, 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    const sid = decoded.slice(0, colon);
    const token = decoded.slice(colon + 1);
    if (colon < 0 || !safeEqual(sid, this.credentials.accountSid) || !safeEqual(token, this.credentials.authToken)) {
      return twilioError(401, 20003, 'Authenticate');
    }
    if (pathSid !== sid) return twilioError(404, 20404, `The requested resource /2010-04-01/Accounts/${pathSid} was not found`);
    return null;
  }

  private now(): string {
    return this.deps.clock.now().toISOString();
  }

  /** The carrier sends from numbers it gave out (or registered to it) and not released, and from the shared number. */
  private async knowsSender(from: string): Promise<boolean> {
    return from === this.deps.config.defaultSmsFrom || (await this.repo.findActiveNumber(from)) !== undefined;
  }

  /** A queued outbound message (SM...) or call (CA...) as the REST API creates it. */
  private outboundRow(kind: 'sms' | 'call', from: string, to: string, params: FormParams, fields: Partial<DevCarrierRow>): DevCarrierRow {
    const now = this.now();
    return {
      sid: `${kind === 'sms' ? 'SM' : 'CA'}${this.sidDigits()}`,
      kind,
      direction: 'outbound',
      account_id: null,
      env_id: null,
      from_number: from,
      to_number: to,
      body: null,
      media_urls: '[]',
      twiml: null,
      status: 'queued',
      status_callback: field(params, 'StatusCallback') ?? null,
      segments: 0,
      duration: null,
      price: null,
      error_code: null,
      created_at: now,
      updated_at: now,
      ...fields,
    };
  }

  async createMessage(params: FormParams): Promise<CarrierReply> {
    const to = field(params, 'To') ?? '';
    const from = field(params, 'From') ?? '';
    const body = field(params, 'Body') ?? '';
    const media = ([] as string[]).concat(params.MediaUrl ?? []);
    if (!to) return twilioError(400, 21604, "A 'To' phone number is required.");
    if (!E164.test(to)) return twilioError(400, 21211, `The 'To' number ${to} is not a valid phone number.`);
    if (!from) return twilioError(400, 21603, "A 'From' phone number is required.");
    if (!(await this.knowsSender(from))) return twilioError(400, 21606, `The From phone number ${from} is not a valid, SMS-capable inbound phone number or short code for your account.`);
    if (body === '' && media.length === 0) return twilioError(400, 21602, 'Message body is required.');
    if (body.length > 1600) return twilioError(400, 21617, 'The concatenated message body exceeds the 1600 character limit.');
    if (media.some((u) => !/^https:\/\//i.test(u))) return twilioError(400, 21620, 'Invalid media URL(s).');
    if (media.length > 10) return twilioError(400, 21623, 'Number of media files exceeds allowed limit.');
    const rest = REST_ERRORS[to];
    if (rest) return twilioError(400, rest.code, rest.message);

    const row = this.outboundRow('sms', from, to, params, {
      body,
      media_urls: JSON.stringify(media),
      segments: Math.max(1, smsEncoding(body).segments),
    });
    await this.repo.insertCarrierMessage(row);
    this.track(this.progressMessage(row));
    return { status: 201, body: this.messageResource(row) };
  }

  async createCall(params: FormParams): Promise<CarrierReply> {
    const to = field(params, 'To') ?? '';
    const from = field(params, 'From') ?? '';
    const twiml = field(params, 'Twiml');
    if (!to) return twilioError(400, 21201, "No 'To' number is specified");
    if (!E164.test(to)) return twilioError(400, 21211, `The 'To' number ${to} is not a valid phone number.`);
    if (!from) return twilioError(400, 21213, "No 'From' number is specified");
    if (!(await this.knowsSender(from))) return twilioError(400, 21210, `The source phone number provided, ${from}, is not yet verified for your account.`);
    if (!twiml && !field(params, 'Url')) return twilioError(400, 21205, 'Url parameter is required. Please provide a Url or Twiml.');
    const rest = REST_ERRORS[to];
    if (rest) return twilioError(400, rest.code, rest.message);

    const row = this.outboundRow('call', from, to, params, { twiml: twiml ?? null });
    await this.repo.insertCarrierMessage(row);
    const events = new Set(([] as string[]).concat(params.StatusCallbackEvent ?? []).flatMap((e) => e.split(/\s+/)));
    this.track(this.progressCall(row, events));
    return { status: 201, body: this.callResource(row) };
  }

  async fetch(kind: 'sms' | 'call', sid: string): Promise<CarrierReply> {
    const row = await this.repo.findCarrierMessage(sid);
    if (!row || row.kind !== kind) return twilioError(404, 20404, `The requested resource ${sid} was not found`);
    return { status: 200, body: kind === 'sms' ? this.messageResource(row) : this.callResource(row) };
  }

  /** The REST list of messages or calls (Messages.json / Calls.json), as rest-list.ts reads its parameters. */
  async restList(kind: 'sms' | 'call', params: ListParams, uri: string): Promise<CarrierReply> {
    const filter = listFilter(kind, params);
    // Read past PageSize: the date filter applies to the resources, after the read.
    const rows = await this.repo.listCarrierResources(kind, { to: filter.to, from: filter.from, limit: LIST_MAX_PAGE_SIZE });
    const resources = rows.map((r) => (kind === 'sms' ? this.messageResource(r) : this.callResource(r))).filter(filter.keeps).slice(0, filter.pageSize);
    return { status: 200, body: listPage(kind, resources, uri, filter.pageSize) };
  }

  async list(scope: { accountId: string; envId: string }, kind: 'sms' | 'call', options: { to?: string; limit?: number }): Promise<DevCarrierMessageView[]> {
    const to = options.to ? normalizePhoneNumber(options.to, 'to') : undefined;
    const rows = await this.repo.listCarrierMessages(scope, kind, { to, limit: options.limit ?? 50 });
    return rows.map((r) => {
      const media = JSON.parse(r.media_urls) as string[];
      const cost = r.price !== null ? Math.abs(Number(r.price)) : undefined;
      return {
        sid: r.sid,
        direction: r.direction,
        from: r.from_number,
        to: r.to_number,
        ...(r.body !== null ? { body: r.body } : {}),
        ...(media.length ? { mediaUrls: media } : {}),
        ...(r.twiml ? { spokenText: spokenText(r.twiml) } : {}),
        status: r.status,
        ...(r.error_code !== null ? { errorCode: r.error_code } : {}),
        ...(kind === 'sms' ? { segments: r.segments } : {}),
        ...(r.duration !== null ? { durationSeconds: r.duration } : {}),
        ...(cost !== undefined ? { price: cost } : {}),
        ...(r.tracking_id ? { trackingId: r.tracking_id } : {}),
        createdAt: r.created_at,
        updatedAt: r.updated_at,
      };
    });
  }

  /**
   * A user texts one of the account's numbers: the carrier keeps the message and delivers the
   * signed inbound webhook to Clarion, as Twilio calls a number's messaging URL.
   */
  async simulateInbound(
    scope: { accountId: string; envId: string },
    input: { from: string; to?: string; text: string; mediaUrls?: string[] },
  ): Promise<{ sid: string; from: string; to: string; webhook: { status: number; body: string } }> {
    const from = normalizePhoneNumber(input.from, 'from');
    const to = input.to ? normalizePhoneNumber(input.to, 'to') : await this.numbers.defaultNumber(scope.accountId);
    if (!to) throw invalid('The account has no number to text.', 'Register one with POST /numbers/order.');
    const ours = await this.numbers.owns(scope.accountId, to);
    if (!ours && to !== this.deps.config.defaultSmsFrom) {
      throw invalid(`${to} is not a number of this account.`, 'GET /numbers/list shows the numbers a user can text.');
    }
    const now = this.now();
    const media = input.mediaUrls ?? [];
    const row: DevCarrierRow = {
      sid: `SM${this.sidDigits()}`,
      kind: 'sms',
      direction: 'inbound',
      account_id: scope.accountId,
      env_id: scope.envId,
      from_number: from,
      to_number: to,
      body: input.text,
      media_urls: JSON.stringify(media),
      twiml: null,
      status: 'received',
      status_callback: null,
      segments: Math.max(1, smsEncoding(input.text).segments),
      duration: null,
      price: null,
      error_code: null,
      created_at: now,
      updated_at: now,
    };
    await this.repo.insertCarrierMessage(row);
    const params: FormParams = {
      MessageSid: row.sid,
      SmsSid: row.sid,
      SmsMessageSid: row.sid,
      AccountSid: this.credentials.accountSid,
      From: from,
      To: to,
      Body: input.text,
      NumMedia: String(media.length),
      NumSegments: String(row.segments),
      SmsStatus: 'received',
      ApiVersion: '2010-04-01',
      // The shared number is every account's sender: a text simulated to it acts only in the
      // caller's account and environment, never on another account's user of that number.
      ...(ours ? {} : { [DEV_CARRIER_SCOPE.accountId]: scope.accountId, [DEV_CARRIER_SCOPE.envId]: scope.envId }),
    };
    media.forEach((url, i) => {
      params[`MediaUrl${i}`] = url;
    });
    const webhook = await this.post(`${publicBase(this.deps.config)}${CALLBACK_PATHS.inbound}`, params);
    if (!webhook) throw new AppError('SERVICE_UNAVAILABLE', 'The carrier could not reach Clarion\'s inbound webhook.', 'Check that CLARION_PUBLIC_URL is this server\'s address.');
    return { sid: row.sid, from, to, webhook };
  }

  /** Waits for the callback sequences under way (server shutdown). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private track(work: Promise<void>): void {
    const p = work.catch((err) => this.deps.logger.warn({ err }, 'development carrier: callback sequence failed'));
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  private async progressMessage(row: DevCarrierRow): Promise<void> {
    const media = JSON.parse(row.media_urls) as string[];
    const outcome = SMS_OUTCOMES[row.to_number];
    const steps: { status: string; errorCode?: number }[] = [{ status: 'queued' }, { status: 'sent' }, outcome ? { status: outcome.status, errorCode: outcome.errorCode } : { status: 'delivered' }];
    for (const step of steps) {
      const cost = step.status === 'delivered' ? price(media.length ? MMS_PRICE : SMS_PRICE_PER_SEGMENT * row.segments) : row.price;
      await this.repo.updateCarrierMessage(row.sid, { status: step.status, error_code: step.errorCode ?? null, price: cost, updated_at: this.now() });
      if (!row.status_callback) continue;
      await this.post(row.status_callback, {
        MessageSid: row.sid,
        SmsSid: row.sid,
        MessageStatus: step.status,
        SmsStatus: step.status,
        AccountSid: this.credentials.accountSid,
        From: row.from_number,
        To: row.to_number,
        ApiVersion: '2010-04-01',
        ...(step.errorCode ? { ErrorCode: String(step.errorCode) } : {}),
      });
    }
  }

  private async progressCall(row: DevCarrierRow, events: Set<string>): Promise<void> {
    const outcome = CALL_OUTCOMES[row.to_number];
    // The carrier "speaks" the text at about 2.5 words a second.
    const words = spokenText(row.twiml ?? '').split(/\s+/).filter(Boolean).length;
    const duration = outcome ? 0 : Math.max(1, Math.ceil(words / 2.5));
    const steps: { status: string; event?: string }[] = [{ status: 'initiated', event: 'initiated' }, { status: 'ringing', event: 'ringing' }];
    if (outcome) steps.push({ status: outcome });
    else steps.push({ status: 'in-progress', event: 'answered' }, { status: 'completed' });
    let sequence = 0;
    for (const step of steps) {
      const final = !step.event;
      const patch: Partial<DevCarrierRow> = { status: step.status, updated_at: this.now() };
      if (final) Object.assign(patch, { duration, price: price(Math.ceil(duration / 60) * CALL_PRICE_PER_MINUTE) });
      await this.repo.updateCarrierMessage(row.sid, patch);
      // Terminal statuses are always reported; the others only when asked for (StatusCallbackEvent).
      if (!row.status_callback || (step.event && !events.has(step.event))) continue;
      await this.post(row.status_callback, {
        CallSid: row.sid,
        CallStatus: step.status,
        AccountSid: this.credentials.accountSid,
        From: row.from_number,
        To: row.to_number,
        Direction: 'outbound-api',
        ApiVersion: '2010-04-01',
        CallbackSource: 'call-progress-events',
        SequenceNumber: String(sequence++),
        Timestamp: rfc2822(this.now()),
        ...(final ? { CallDuration: String(duration), Duration: String(Math.ceil(duration / 60)) } : {}),
      });
    }
  }

  /** POSTs a signed form as the carrier does; null when Clarion could not be reached. */
  private async post(url: string, params: FormParams): Promise<{ status: number; body: string } | null> {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'x-twilio-signature': twilioSignature(this.credentials.authToken, url, params),
          'user-agent': 'TwilioProxy/1.1 (Clarion development carrier)',
        },
        body: encodeForm(params),
        signal: AbortSignal.timeout(15_000),
      });
      const body = await res.text();
      if (res.status >= 400) this.deps.logger.warn({ url, status: res.status }, 'development carrier: callback refused');
      return { status: res.status, body };
    } catch (err) {
      this.deps.logger.warn({ err, url }, 'development carrier: callback failed');
      return null;
    }
  }

  private messageResource(row: DevCarrierRow): Record<string, unknown> {
    const media = JSON.parse(row.media_urls) as string[];
    const uri = `/2010-04-01/Accounts/${this.credentials.accountSid}/Messages/${row.sid}.json`;
    return {
      account_sid: this.credentials.accountSid,
      api_version: '2010-04-01',
      body: row.body,
      date_created: rfc2822(row.created_at),
      date_updated: rfc2822(row.updated_at),
      date_sent: row.status === 'queued' ? null : rfc2822(row.updated_at),
      direction: row.direction === 'inbound' ? 'inbound' : 'outbound-api',
      error_code: row.error_code,
      error_message: null,
      from: row.from_number,
      messaging_service_sid: null,
      num_media: String(media.length),
      num_segments: String(row.segments),
      price: row.price,
      price_unit: 'USD',
      sid: row.sid,
      status: row.status,
      subresource_uris: { media: uri.replace('.json', '/Media.json') },
      to: row.to_number,
      uri,
    };
  }

  private callResource(row: DevCarrierRow): Record<string, unknown> {
    return {
      account_sid: this.credentials.accountSid,
      api_version: '2010-04-01',
      date_created: rfc2822(row.created_at),
      date_updated: rfc2822(row.updated_at),
      direction: 'outbound-api',
      duration: row.duration === null ? null : String(row.duration),
      // Dialled as soon as it is created, once it leaves the queue.
      start_time: row.status === 'queued' ? null : rfc2822(row.created_at),
      from: row.from_number,
      price: row.price,
      price_unit: 'USD',
      sid: row.sid,
      status: row.status,
      to: row.to_number,
      uri: `/2010-04-01/Accounts/${this.credentials.accountSid}/Calls/${row.sid}.json`,
    };
  }
}

import { DeliveryError } from '../types.js';
import { type TwilioErrorBody, deliveryErrorFromResponse } from './twilio-errors.js';

/** Where the Twilio REST API is and who we are there. */
export interface TwilioEndpoint {
  accountSid: string;
  authToken: string;
  /** e.g. https://api.twilio.com, or the local development carrier's base. */
  baseUrl: string;
}

/** The fields of Twilio's Message resource that Clarion reads. */
export interface TwilioMessage {
  sid: string;
  status: string;
  from: string;
  to: string;
  num_segments?: string;
  num_media?: string;
  price?: string | null;
  price_unit?: string | null;
  error_code?: number | null;
  body?: string | null;
  /** e.g. outbound-api for what the REST API created, inbound for a text a user sent. */
  direction?: string;
  /** RFC 2822, e.g. "Mon, 13 Aug 2018 23:08:35 +0000". */
  date_created?: string | null;
}

/** The fields of Twilio's Call resource that Clarion reads. */
export interface TwilioCall {
  sid: string;
  status: string;
  from: string;
  to: string;
  duration?: string | null;
  price?: string | null;
  price_unit?: string | null;
  direction?: string;
  /** RFC 2822, e.g. "Mon, 13 Aug 2018 23:08:35 +0000". */
  date_created?: string | null;
}

/** Which Messages or Calls to list: those from one number to another, newest first, one page. */
export interface ListQuery {
  to: string;
  from: string;
  pageSize: number;
}

/** The fields of Twilio's IncomingPhoneNumber resource that Clarion reads. */
export interface TwilioIncomingNumber {
  sid: string;
  phone_number: string;
}

/**
 * An AvailablePhoneNumber resource (Local, in Clarion's searches). Twilio's documents name the
 * capabilities `sms`/`mms`/`voice`, and its answers have also spelt them `SMS`/`MMS`: read either.
 */
export interface TwilioAvailableNumber {
  phone_number: string;
  friendly_name?: string;
  locality?: string | null;
  region?: string | null;
  iso_country?: string;
  capabilities?: Record<string, boolean | undefined>;
}

export interface AvailableNumbersQuery {
  /** ISO 3166-1 alpha-2. */
  countryCode: string;
  areaCode?: string;
  /** Only numbers with each of these capabilities. */
  capabilities: ('sms' | 'mms' | 'voice')[];
  pageSize: number;
}

export interface SendSmsRequest {
  to: string;
  from: string;
  body?: string;
  mediaUrls?: string[];
  statusCallback?: string;
}

export interface CreateCallRequest {
  to: string;
  from: string;
  twiml: string;
  statusCallback?: string;
  statusCallbackEvents?: string[];
}

type Form = [string, string][];

/**
 * How long a request may take by default. Long, because giving up on a request Twilio received
 * does not unsend it: at 15 s, an answer that came at 16 s was dropped and the text sent again
 * (an audit saw two Message resources for one send). A slow call holds no routing slot (the
 * delivery is handed over after FIRST_ATTEMPT_BUDGET_MS), and HANDOVER_DELAY_MS is longer still.
 */
export const REQUEST_TIMEOUT_MS = 60_000;

/**
 * A client of the Twilio REST API (2010-04-01): form-encoded bodies, Basic AccountSid:AuthToken,
 * JSON answers. Failures are DeliveryErrors (retryable for 429, 5xx and network errors).
 *
 * Twilio's Messages and Calls endpoints take no idempotency key, so a retry after a timeout, a
 * lost connection or a 5xx may send twice: before such a retry the SMS and call executors look
 * for what the lost attempt created (listMessages / listCalls; see unconfirmed-sends.ts).
 */
export class TwilioClient {
  constructor(
    private readonly endpoint: TwilioEndpoint,
    private readonly options: { timeoutMs?: number } = {},
  ) {}

  get accountSid(): string {
    return this.endpoint.accountSid;
  }

  sendMessage(req: SendSmsRequest): Promise<TwilioMessage> {
    const form: Form = [
      ['To', req.to],
      ['From', req.from],
    ];
    if (req.body !== undefined && req.body !== '') form.push(['Body', req.body]);
    for (const url of req.mediaUrls ?? []) form.push(['MediaUrl', url]);
    if (req.statusCallback) form.push(['StatusCallback', req.statusCallback]);
    return this.call<TwilioMessage>('POST', 'Messages.json', form);
  }

  createCall(req: CreateCallRequest): Promise<TwilioCall> {
    const form: Form = [
      ['To', req.to],
      ['From', req.from],
      ['Twiml', req.twiml],
    ];
    if (req.statusCallback) {
      form.push(['StatusCallback', req.statusCallback], ['StatusCallbackMethod', 'POST']);
      for (const event of req.statusCallbackEvents ?? []) form.push(['StatusCallbackEvent', event]);
    }
    return this.call<TwilioCall>('POST', 'Calls.json', form);
  }

  /**
   * The account's Messages from `from` to `to` (GET Messages.json?To=&From=&PageSize=), the first
   * page. No DateSent filter: it filters on the date Twilio sent the message, which one still
   * queued at Twilio does not have yet, and that is just the message a retry must find.
   */
  async listMessages(query: ListQuery): Promise<TwilioMessage[]> {
    const page = await this.call<{ messages?: TwilioMessage[] }>('GET', `Messages.json?${listParams(query)}`);
    return page.messages ?? [];
  }

  /** The account's Calls from `from` to `to` (GET Calls.json?To=&From=&PageSize=); no StartTime filter, for the same reason. */
  async listCalls(query: ListQuery): Promise<TwilioCall[]> {
    const page = await this.call<{ calls?: TwilioCall[] }>('GET', `Calls.json?${listParams(query)}`);
    return page.calls ?? [];
  }

  fetchMessage(sid: string): Promise<TwilioMessage> {
    return this.call<TwilioMessage>('GET', `Messages/${encodeURIComponent(sid)}.json`);
  }

  fetchCall(sid: string): Promise<TwilioCall> {
    return this.call<TwilioCall>('GET', `Calls/${encodeURIComponent(sid)}.json`);
  }

  /** Whether this Twilio account has the number among its IncomingPhoneNumbers. */
  async ownsNumber(phoneNumber: string): Promise<boolean> {
    return (await this.findIncomingNumber(phoneNumber)) !== undefined;
  }

  /** The number among this Twilio account's IncomingPhoneNumbers, with its sid (PN...). */
  async findIncomingNumber(phoneNumber: string): Promise<TwilioIncomingNumber | undefined> {
    const page = await this.call<{ incoming_phone_numbers?: TwilioIncomingNumber[] }>('GET', `IncomingPhoneNumbers.json?PhoneNumber=${encodeURIComponent(phoneNumber)}`);
    return (page.incoming_phone_numbers ?? []).find((n) => n.phone_number === phoneNumber);
  }

  /** Gives a number back to Twilio (DELETE IncomingPhoneNumbers/{sid}): it stops ringing and billing there. */
  async releaseIncomingNumber(sid: string): Promise<void> {
    await this.call<undefined>('DELETE', `IncomingPhoneNumbers/${encodeURIComponent(sid)}.json`);
  }

  /** Local numbers Twilio has in stock (AvailablePhoneNumbers/{CountryCode}/Local). */
  async searchAvailableNumbers(query: AvailableNumbersQuery): Promise<TwilioAvailableNumber[]> {
    const params = new URLSearchParams({ PageSize: String(query.pageSize) });
    if (query.areaCode) params.set('AreaCode', query.areaCode);
    const flags = { sms: 'SmsEnabled', mms: 'MmsEnabled', voice: 'VoiceEnabled' } as const;
    for (const capability of query.capabilities) params.set(flags[capability], 'true');
    const page = await this.call<{ available_phone_numbers?: TwilioAvailableNumber[] }>(
      'GET',
      `AvailablePhoneNumbers/${encodeURIComponent(query.countryCode)}/Local.json?${params.toString()}`,
    );
    return page.available_phone_numbers ?? [];
  }

  private async call<T>(method: 'GET' | 'POST' | 'DELETE', resource: string, form?: Form): Promise<T> {
    const url = `${this.endpoint.baseUrl}/2010-04-01/Accounts/${encodeURIComponent(this.endpoint.accountSid)}/${resource}`;
    const auth = Buffer.from(`${this.endpoint.accountSid}:${this.endpoint.authToken}`).toString('base64');
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: {
          authorization: `Basic ${auth}`,
          accept: 'application/json',
          ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        ...(form ? { body: new URLSearchParams(form).toString() } : {}),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      const timedOut = (err as Error).name === 'TimeoutError';
      throw new DeliveryError(timedOut ? 'TIMEOUT' : 'PROVIDER_UNREACHABLE', `Twilio REST API ${timedOut ? 'timed out' : 'unreachable'}: ${causeOf(err)}`, { retryable: true });
    }
    const text = await res.text().catch(() => '');
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (!res.ok) throw deliveryErrorFromResponse(res.status, json as TwilioErrorBody | undefined, res.headers.get('retry-after'));
    // A deleted resource is answered 204 without a body.
    if (method === 'DELETE') return undefined as T;
    if (!json || typeof json !== 'object') {
      throw new DeliveryError('PROVIDER_BAD_RESPONSE', `Twilio answered ${res.status} without a JSON resource`, { retryable: true });
    }
    return json as T;
  }
}

function listParams(query: ListQuery): string {
  return new URLSearchParams({ To: query.to, From: query.from, PageSize: String(query.pageSize) }).toString();
}

function causeOf(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(err);
}

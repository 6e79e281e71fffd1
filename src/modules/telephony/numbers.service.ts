import { randomInt } from 'node:crypto';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { telephonyClient, telephonyEndpoint } from '../../channels/telephony/endpoint.js';
import type { TwilioClient } from '../../channels/telephony/twilio-client.js';
import { DeliveryError } from '../../channels/types.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { isUniqueViolation } from '../../storage/errors.js';
import { normalizePhoneNumber } from '../users/users.validation.js';
import { type AvailableNumberView, type AvailableSearch, devAvailableView, devPoolCandidates, twilioAvailableView } from './available-numbers.js';
import type { PhoneNumberRow, TelephonyRepository } from './telephony.repository.js';

/** ListPhoneNumbersResponseNumbersInner of the pingram SDK. */
export interface PhoneNumberView {
  phoneNumber: string;
  label?: string;
  createdAt: string;
  countryCode: string;
  numberType: string;
  billingStatus: 'active' | 'released';
  /** YYYY-MM-DD; '' for a released number (nothing is billed). */
  nextBillingDate: string;
  monthlyPrice: number;
  releasedAt?: string;
}

/** ReleasePhoneNumberResponse of the pingram SDK. */
export interface ReleasedNumber {
  phoneNumber: string;
  released: true;
  releasedAt: string;
}

/**
 * How long a released number stays its account's: listed as released and reactivated by ordering
 * it again. After that it leaves the released list and another account may order it.
 */
export const RELEASE_HOLD_DAYS = 14;

const TOLL_FREE_NANP = /^\+1(800|833|844|855|866|877|888)/;

/**
 * The numbers an account sends from. A number belongs to one account, which is how an inbound
 * message finds its account. With the local development carrier every account is given a
 * number of its own (555-01XX, the range reserved for fiction) the first time it needs one
 * (never again once it has had one: a released number is not replaced behind the account's back).
 */
export class NumbersService {
  constructor(
    private readonly deps: Pick<Deps, 'config' | 'clock' | 'secrets'>,
    private readonly repo: TelephonyRepository,
  ) {}

  private get dev(): boolean {
    return telephonyEndpoint(this.deps)?.dev === true;
  }

  async list(accountId: string): Promise<{ numbers: PhoneNumberView[]; sharedNumber: string }> {
    if (this.dev) await this.ensureDevNumber(accountId);
    const rows = await this.repo.listNumbers(accountId);
    const now = this.deps.clock.now();
    return {
      numbers: rows.map((r) => this.view(r, now)),
      sharedNumber: this.deps.config.defaultSmsFrom ?? (await this.defaultNumber(accountId)) ?? '',
    };
  }

  /**
   * Registers a number for the account. With Twilio it must be one of the configured Twilio
   * account's IncomingPhoneNumbers (numbers are bought in Twilio, not here); the development
   * carrier accepts any number nobody else has.
   */
  async order(accountId: string, raw: string): Promise<{ orderId: string; status: string; phoneNumber: string }> {
    const phoneNumber = normalizePhoneNumber(raw, 'phoneNumber');
    const existing = await this.repo.findNumber(phoneNumber);
    const takenBy = (row: PhoneNumberRow | undefined) => row && row.account_id !== accountId && !(row.released_at && row.released_at < this.holdCutoff());
    if (takenBy(existing)) {
      throw new AppError('CONFLICT', `${phoneNumber} belongs to another account.`, 'Each number belongs to one account, so inbound messages find their account.');
    }
    if (existing?.account_id === accountId && existing.released_at === null) return orderAnswer(phoneNumber);
    const endpoint = telephonyEndpoint(this.deps);
    if (!endpoint) throw new AppError('SERVICE_UNAVAILABLE', 'No telephony provider is configured.', 'Set TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN, or enable CLARION_DEV_CARRIER.');
    if (!endpoint.dev) await this.requireTwilioOwns(phoneNumber);
    const write = async (isDefault: boolean) => {
      // Released by this account: active again, with its original createdAt.
      if (existing?.account_id === accountId) return void (await this.repo.reactivateNumber(accountId, phoneNumber, isDefault));
      const row: PhoneNumberRow = {
        phone_number: phoneNumber,
        account_id: accountId,
        label: null,
        source: endpoint.dev ? 'dev' : 'twilio',
        is_default: isDefault ? 1 : 0,
        created_at: this.deps.clock.now().toISOString(),
        released_at: null,
      };
      if (existing) await this.repo.takeOverReleasedNumber(row, this.holdCutoff());
      else await this.repo.insertNumber(row);
    };
    const isDefault = !(await this.repo.listNumbers(accountId)).some((r) => r.is_default === 1);
    try {
      await write(isDefault);
    } catch (err) {
      // Another number became the account's default since the read (the automatic development
      // number, or a concurrent order): the index phone_numbers_one_default keeps that one.
      if (!isDefault || !isUniqueViolation(err)) throw err;
      await write(false);
    }
    if (existing?.account_id === accountId) return orderAnswer(phoneNumber);
    const now = await this.repo.findNumber(phoneNumber);
    if (now?.account_id !== accountId || now.released_at !== null) throw new AppError('CONFLICT', `${phoneNumber} belongs to another account.`);
    return orderAnswer(phoneNumber);
  }

  /**
   * Releases one of the account's numbers: it no longer sends (or is the default), is listed by
   * listReleased, and is the account's to reactivate with order for RELEASE_HOLD_DAYS. A Twilio
   * number is given back to Twilio (DELETE IncomingPhoneNumbers/{sid}) first; if Twilio refuses,
   * nothing changes here. Releasing a released number answers its release again.
   */
  async release(accountId: string, raw: string): Promise<ReleasedNumber> {
    const phoneNumber = normalizePhoneNumber(raw, 'phoneNumber');
    const row = await this.repo.findNumber(phoneNumber);
    if (!row || row.account_id !== accountId || (row.released_at !== null && row.released_at < this.holdCutoff())) {
      throw new AppError('NOT_FOUND', `${phoneNumber} is not a number of this account.`, 'GET /numbers/list shows the account\'s numbers.');
    }
    if (row.released_at !== null) return { phoneNumber, released: true, releasedAt: row.released_at };
    if (row.source === 'twilio') await this.releaseInTwilio(phoneNumber);
    const releasedAt = this.deps.clock.now().toISOString();
    if (!(await this.repo.releaseNumber(accountId, phoneNumber, releasedAt))) {
      // Released concurrently: answer that release.
      const again = await this.repo.findNumber(phoneNumber);
      if (again?.account_id === accountId && again.released_at) return { phoneNumber, released: true, releasedAt: again.released_at };
      throw new AppError('CONFLICT', `${phoneNumber} changed while it was being released.`, 'Read GET /numbers/list and try again.');
    }
    return { phoneNumber, released: true, releasedAt };
  }

  /** The account's numbers released in the last RELEASE_HOLD_DAYS, latest first. */
  async listReleased(accountId: string): Promise<{ numbers: PhoneNumberView[] }> {
    const rows = await this.repo.listReleasedNumbers(accountId, this.holdCutoff());
    const now = this.deps.clock.now();
    return { numbers: rows.map((r) => this.view(r, now)) };
  }

  /**
   * Numbers the carrier can give: Twilio's stock of local numbers, or the development carrier's
   * documented pool (available-numbers.ts) less the numbers accounts hold.
   */
  async searchAvailable(search: AvailableSearch): Promise<{ numbers: AvailableNumberView[] }> {
    const endpoint = telephonyEndpoint(this.deps);
    if (!endpoint) throw new AppError('SERVICE_UNAVAILABLE', 'No telephony provider is configured.', 'Set TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN, or enable CLARION_DEV_CARRIER.');
    if (endpoint.dev) {
      const candidates = devPoolCandidates(search);
      const taken = await this.repo.takenNumbers(candidates);
      return { numbers: candidates.filter((n) => !taken.has(n)).slice(0, search.limit).map(devAvailableView) };
    }
    const found = await this.twilio('search numbers in', (client) =>
      client.searchAvailableNumbers({ countryCode: search.countryCode, capabilities: search.features, pageSize: search.limit, ...(search.areaCode ? { areaCode: search.areaCode } : {}) }),
      // Twilio answers 404 for a country it has no numbers in.
      { 20404: () => invalid(`Twilio has no phone numbers in ${search.countryCode}.`, 'Use an ISO 3166-1 alpha-2 country code Twilio sells numbers in, e.g. US or CA.') },
    );
    return { numbers: found.slice(0, search.limit).map(twilioAvailableView) };
  }

  /** Whether the account may send from this number (an active number of the account). */
  async owns(accountId: string, phoneNumber: string): Promise<boolean> {
    return (await this.repo.findActiveNumber(phoneNumber))?.account_id === accountId;
  }

  private holdCutoff(): string {
    return new Date(this.deps.clock.now().getTime() - RELEASE_HOLD_DAYS * 86_400_000).toISOString();
  }

  private async requireTwilioOwns(phoneNumber: string): Promise<void> {
    const owned = await this.twilio('check the number with', (client) => client.ownsNumber(phoneNumber));
    if (!owned) throw invalid(`${phoneNumber} is not a number of the configured Twilio account.`, 'Buy or port the number in Twilio first, then register it here.');
  }

  private async releaseInTwilio(phoneNumber: string): Promise<void> {
    await this.twilio('release the number in', async (client) => {
      const incoming = await client.findIncomingNumber(phoneNumber);
      // Already gone from the Twilio account (released in its console): only our record is left.
      if (incoming) await client.releaseIncomingNumber(incoming.sid);
    });
  }

  /** Runs a Twilio REST call; its failures are a PROVIDER_ERROR (or what `byCode` makes of a Twilio error code). */
  private async twilio<T>(what: string, call: (client: TwilioClient) => Promise<T>, byCode: Record<string, () => AppError> = {}): Promise<T> {
    const endpoint = telephonyEndpoint(this.deps);
    if (!endpoint || endpoint.dev) {
      throw new AppError('SERVICE_UNAVAILABLE', `Twilio is not configured, so Clarion cannot ${what} Twilio.`, 'Set TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN.');
    }
    try {
      return await call(telephonyClient(this.deps)!);
    } catch (err) {
      if (!(err instanceof DeliveryError)) throw err;
      const mapped = err.options.providerCode ? byCode[err.options.providerCode] : undefined;
      if (mapped) throw mapped();
      throw new AppError('PROVIDER_ERROR', `Could not ${what} Twilio: ${err.message}`, 'Check TWILIO_* settings and retry.');
    }
  }

  /** The account's default sender: its default number (a development number with the local carrier), else the shared one. */
  async defaultNumber(accountId: string): Promise<string | undefined> {
    const rows = await this.repo.listNumbers(accountId);
    const own = rows.find((r) => r.is_default === 1) ?? rows[0];
    if (own) return own.phone_number;
    if (this.dev) return (await this.ensureDevNumber(accountId))?.phone_number ?? this.deps.config.defaultSmsFrom;
    return this.deps.config.defaultSmsFrom;
  }

  /**
   * A send's `sms.from` at acceptance: a number of the account (or the server's shared sender),
   * else refused with 400 rather than accepted to go out from another number than the one named.
   */
  async checkSender(accountId: string, requested: string, field = 'sms.from'): Promise<void> {
    const number = normalizePhoneNumber(requested, field);
    if (number === this.deps.config.defaultSmsFrom || (await this.owns(accountId, number))) return;
    throw invalid(
      `${field} ${number} is not a number of this account.`,
      "Name a number listed by GET /numbers/list (POST /numbers/order adds one), or leave sms.from out to send from the account's default number.",
    );
  }

  /**
   * `requested` when the account owns it or it is the shared sender (as checkSender accepts),
   * otherwise the account default: at delivery, a number the account released since.
   */
  async senderFor(accountId: string, requested?: string): Promise<string | undefined> {
    if (requested) {
      let normalized: string | undefined;
      try {
        normalized = normalizePhoneNumber(requested, 'sms.from');
      } catch {
        normalized = undefined;
      }
      if (normalized && (normalized === this.deps.config.defaultSmsFrom || (await this.owns(accountId, normalized)))) return normalized;
    }
    return this.defaultNumber(accountId);
  }

  /** The account's default development number, allocated on first need; undefined once it released its numbers. */
  private async ensureDevNumber(accountId: string): Promise<PhoneNumberRow | undefined> {
    const active = async () => {
      const rows = await this.repo.listNumbers(accountId);
      return rows.find((r) => r.is_default === 1) ?? rows[0];
    };
    const current = await active();
    if (current) return current;
    // Numbers, none active: released by the account (it gets no new one), or just allocated by a
    // concurrent delivery of the same account (read again: that one is this account's too).
    if (await this.repo.hasAnyNumber(accountId)) return active();
    for (let i = 0; i < 50; i++) {
      // A US geographic area code in use (a plausible local US number, never toll-free); the line is 555-01XX.
      let candidate: string;
      do candidate = `+1${randomInt(200, 990)}55501${String(randomInt(0, 100)).padStart(2, '0')}`;
      while (parsePhoneNumberFromString(candidate)?.country !== 'US' || TOLL_FREE_NANP.test(candidate));
      const row: PhoneNumberRow = {
        phone_number: candidate,
        account_id: accountId,
        label: 'Development number (local carrier)',
        source: 'dev',
        is_default: 1,
        created_at: this.deps.clock.now().toISOString(),
        released_at: null,
      };
      if (await this.repo.insertFirstDefaultNumber(row)) return row;
      // A concurrent delivery may just have given this account its number (or taken the candidate).
      const again = await active();
      if (again) return again;
    }
    throw new AppError('SERVICE_UNAVAILABLE', 'No free development number is left.', 'Register a number with POST /numbers/order.');
  }

  private view(row: PhoneNumberRow, now: Date): PhoneNumberView {
    const parsed = parsePhoneNumberFromString(row.phone_number);
    return {
      phoneNumber: row.phone_number,
      ...(row.label ? { label: row.label } : {}),
      createdAt: row.created_at,
      countryCode: parsed?.country ?? (parsed?.countryCallingCode === '1' ? 'US' : 'ZZ'),
      numberType: TOLL_FREE_NANP.test(row.phone_number) ? 'toll_free' : 'local',
      billingStatus: row.released_at ? 'released' : 'active',
      nextBillingDate: row.released_at ? '' : nextMonthly(new Date(row.created_at), now),
      // Clarion charges no rent; a Twilio number's rent is billed by Twilio.
      monthlyPrice: 0,
      ...(row.released_at ? { releasedAt: row.released_at } : {}),
    };
  }
}

const orderAnswer = (phoneNumber: string) => ({ orderId: `order-${phoneNumber.slice(1)}`, status: 'completed', phoneNumber });

/** The first monthly anniversary of `from` after `now`, as YYYY-MM-DD (day clamped to the month's length). */
export function nextMonthly(from: Date, now: Date): string {
  for (let months = 1; ; months++) {
    const y = from.getUTCFullYear();
    const m = from.getUTCMonth() + months;
    const last = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
    const candidate = new Date(Date.UTC(y, m, Math.min(from.getUTCDate(), last)));
    if (candidate.getTime() > now.getTime()) return candidate.toISOString().slice(0, 10);
  }
}

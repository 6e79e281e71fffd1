import { randomInt } from 'node:crypto';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { telephonyClient, telephonyEndpoint } from '../../channels/telephony/endpoint.js';
import { DeliveryError } from '../../channels/types.js';
import type { Deps } from '../../deps.js';
import { AppError, invalid } from '../../errors.js';
import { normalizePhoneNumber } from '../users/users.validation.js';
import type { PhoneNumberRow, TelephonyRepository } from './telephony.repository.js';

/** ListPhoneNumbersResponseNumbersInner of the pingram SDK. */
export interface PhoneNumberView {
  phoneNumber: string;
  label?: string;
  createdAt: string;
  countryCode: string;
  numberType: string;
  billingStatus: 'active' | 'released';
  nextBillingDate: string;
  monthlyPrice: number;
}

const TOLL_FREE_NANP = /^\+1(800|833|844|855|866|877|888)/;

/**
 * The numbers an account sends from. A number belongs to one account, which is how an inbound
 * message finds its account. With the local development carrier every account is given a
 * number of its own (555-01XX, the range reserved for fiction) the first time it needs one.
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
    if (existing && existing.account_id !== accountId) {
      throw new AppError('CONFLICT', `${phoneNumber} belongs to another account.`, 'Each number belongs to one account, so inbound messages find their account.');
    }
    if (!existing) {
      const endpoint = telephonyEndpoint(this.deps);
      if (!endpoint) throw new AppError('SERVICE_UNAVAILABLE', 'No telephony provider is configured.', 'Set TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN, or enable CLARION_DEV_CARRIER.');
      if (!endpoint.dev) {
        let owned: boolean;
        try {
          owned = await telephonyClient(this.deps)!.ownsNumber(phoneNumber);
        } catch (err) {
          if (!(err instanceof DeliveryError)) throw err;
          throw new AppError('PROVIDER_ERROR', `Could not check the number with Twilio: ${err.message}`, 'Check TWILIO_* settings and retry.');
        }
        if (!owned) throw invalid(`${phoneNumber} is not a number of the configured Twilio account.`, 'Buy or port the number in Twilio first, then register it here.');
      }
      const hasDefault = (await this.repo.listNumbers(accountId)).some((r) => r.is_default === 1);
      await this.repo.insertNumber({
        phone_number: phoneNumber,
        account_id: accountId,
        label: null,
        source: endpoint.dev ? 'dev' : 'twilio',
        is_default: hasDefault ? 0 : 1,
        created_at: this.deps.clock.now().toISOString(),
      });
      const now = await this.repo.findNumber(phoneNumber);
      if (now?.account_id !== accountId) throw new AppError('CONFLICT', `${phoneNumber} belongs to another account.`);
    }
    return { orderId: `order-${phoneNumber.slice(1)}`, status: 'completed', phoneNumber };
  }

  /** Whether the account may send from this number. */
  async owns(accountId: string, phoneNumber: string): Promise<boolean> {
    return (await this.repo.findNumber(phoneNumber))?.account_id === accountId;
  }

  /** The account's default sender: its default number (a development number with the local carrier), else the shared one. */
  async defaultNumber(accountId: string): Promise<string | undefined> {
    const rows = await this.repo.listNumbers(accountId);
    const own = rows.find((r) => r.is_default === 1) ?? rows[0];
    if (own) return own.phone_number;
    if (this.dev) return (await this.ensureDevNumber(accountId)).phone_number;
    return this.deps.config.defaultSmsFrom;
  }

  /** `requested` when the account owns it, otherwise the account default. */
  async senderFor(accountId: string, requested?: string): Promise<string | undefined> {
    if (requested) {
      let normalized: string | undefined;
      try {
        normalized = normalizePhoneNumber(requested, 'sms.from');
      } catch {
        normalized = undefined;
      }
      if (normalized && (await this.owns(accountId, normalized))) return normalized;
    }
    return this.defaultNumber(accountId);
  }

  private async ensureDevNumber(accountId: string): Promise<PhoneNumberRow> {
    const rows = await this.repo.listNumbers(accountId);
    if (rows.length > 0) return rows.find((r) => r.is_default === 1) ?? rows[0];
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
      };
      if (await this.repo.insertNumber(row)) return row;
      // A concurrent call may just have given this account its number.
      const again = await this.repo.listNumbers(accountId);
      if (again.length > 0) return again[0];
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
      billingStatus: 'active',
      nextBillingDate: nextMonthly(new Date(row.created_at), now),
      // Clarion charges no rent; a Twilio number's rent is billed by Twilio.
      monthlyPrice: 0,
    };
  }
}

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

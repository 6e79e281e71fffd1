import { parsePhoneNumberFromString } from 'libphonenumber-js';
import type { TwilioAvailableNumber } from '../../channels/telephony/twilio-client.js';
import { invalid } from '../../errors.js';

/** SearchAvailablePhoneNumbersResponseNumbersInner of the pingram SDK. */
export interface AvailableNumberView {
  phoneNumber: string;
  locality?: string;
  administrativeArea?: string;
  phoneNumberType?: string;
  features?: string[];
  monthlyPrice: number;
}

export type NumberFeature = 'sms' | 'mms' | 'voice';
const FEATURES: readonly NumberFeature[] = ['sms', 'mms', 'voice'];

export interface AvailableSearch {
  countryCode: string;
  features: NumberFeature[];
  areaCode?: string;
  limit: number;
}

export const AVAILABLE_LIMIT_DEFAULT = 10;
export const AVAILABLE_LIMIT_MAX = 50;

/** The SDK's searchAvailable parameters, checked: `features` comma-separated, `areaCode` an area code. */
export function parseAvailableSearch(input: { countryCode: string; features?: string; areaCode?: string; limit?: number }): AvailableSearch {
  const features: NumberFeature[] = [];
  for (const raw of (input.features ?? '').split(',')) {
    const name = raw.trim().toLowerCase();
    if (!name) continue;
    if (!FEATURES.includes(name as NumberFeature)) throw invalid(`features: "${raw.trim()}" is not a number feature.`, `Use a comma-separated list of ${FEATURES.join(', ')}.`);
    if (!features.includes(name as NumberFeature)) features.push(name as NumberFeature);
  }
  const areaCode = input.areaCode?.trim();
  if (areaCode !== undefined && areaCode !== '' && !/^\d{2,5}$/.test(areaCode)) {
    throw invalid(`areaCode "${input.areaCode}" is not an area code.`, 'Pass the digits of the area code only, e.g. 415.');
  }
  return { countryCode: input.countryCode.toUpperCase(), features, ...(areaCode ? { areaCode } : {}), limit: input.limit ?? AVAILABLE_LIMIT_DEFAULT };
}

/**
 * The development carrier's stock (README: SMS and calls, Numbers): for each area code, the 100
 * numbers NPA-555-0100 to NPA-555-0199 (the range reserved for fiction), in that order, area code
 * by area code; `areaCode` narrows it to one area code. Every number has every feature.
 */
export const DEV_POOL_AREA_CODES: Readonly<Record<string, readonly string[]>> = {
  US: ['415', '212', '312', '206', '512'],
  CA: ['416', '604', '514'],
};

const DEV_FEATURES: NumberFeature[] = ['sms', 'mms', 'voice'];

/** Candidates of the development pool for the search, in pool order (more than `limit`: some may be taken). */
export function devPoolCandidates(search: AvailableSearch): string[] {
  const areaCodes = DEV_POOL_AREA_CODES[search.countryCode];
  if (!areaCodes) {
    throw invalid(`The development carrier has no numbers in ${search.countryCode}.`, `Search in ${Object.keys(DEV_POOL_AREA_CODES).join(' or ')}, or configure Twilio (TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN).`);
  }
  const candidates: string[] = [];
  for (const npa of search.areaCode ? [search.areaCode] : areaCodes) {
    // An area code of another country (or not a geographic one) has no numbers here, as with Twilio.
    if (parsePhoneNumberFromString(`+1${npa}5550100`)?.country !== search.countryCode) continue;
    for (let line = 0; line < 100; line++) candidates.push(`+1${npa}55501${String(line).padStart(2, '0')}`);
  }
  return candidates;
}

export function devAvailableView(phoneNumber: string): AvailableNumberView {
  return { phoneNumber, phoneNumberType: 'local', features: [...DEV_FEATURES], monthlyPrice: 0 };
}

/** Twilio's AvailablePhoneNumber as the SDK's model; Clarion charges no rent (Twilio bills its own). */
export function twilioAvailableView(number: TwilioAvailableNumber): AvailableNumberView {
  const capabilities = Object.entries(number.capabilities ?? {}).filter(([, on]) => on === true).map(([name]) => name.toLowerCase());
  return {
    phoneNumber: number.phone_number,
    ...(number.locality ? { locality: number.locality } : {}),
    ...(number.region ? { administrativeArea: number.region } : {}),
    phoneNumberType: 'local',
    features: FEATURES.filter((f) => capabilities.includes(f)),
    monthlyPrice: 0,
  };
}

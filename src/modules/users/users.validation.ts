import { createECDH } from 'node:crypto';
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { EMAIL_ADDRESS_MAX, isEmailAddress } from '../../channels/email/recipients.js';
import { characterCount } from '../../characters.js';
import { AppError, invalid } from '../../errors.js';
import { hasMaskedValue } from './slack-token.js';
import type { IdentifyPatch, Properties, PropertyValue, PushToken, SlackToken, WebPushToken } from './users.types.js';

/**
 * Pure checks and normalisation of user input. They run in the service, not only in the HTTP
 * schema, because the sending pipeline hands `to` objects straight to the service.
 */

export const USER_ID_MAX = 256;
export const EMAIL_MAX = EMAIL_ADDRESS_MAX;
export const PROPERTY_LIMITS = { keys: 25, keyLength: 64, stringValueLength: 256, serializedBytes: 1024 } as const;

const FIX_PROPERTIES = 'Keep properties to at most 25 keys of at most 64 characters, string/number/boolean values (strings up to 256 characters), and 1 KB serialized.';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function validateUserId(id: unknown, field = 'userId'): string {
  if (typeof id !== 'string' || id.length < 1 || characterCount(id) > USER_ID_MAX) {
    throw invalid(`${field} must be a string of 1 to ${USER_ID_MAX} characters.`, 'Use your own stable identifier for the user (e.g. a database id or an email address).');
  }
  return id;
}

export function validateEmail(value: unknown, field = 'email'): string {
  if (!isEmailAddress(value)) {
    throw invalid(`${field} is not a valid email address.`, `Send an address like "alice@example.com" (at most ${EMAIL_MAX} characters, no spaces).`);
  }
  return value;
}

const PHONE_CHARS = /^\+?[\d\s().-]{3,40}$/;

/**
 * Phone numbers are stored in E.164. Unformatted numbers are read as US/Canada numbers.
 * isPossible() (length rules) rather than isValid() (number plan), so provider test numbers such
 * as +15005550006 pass.
 */
export function normalizePhoneNumber(value: unknown, field = 'number'): string {
  const fix = 'Send an E.164 number like "+14155550123"; numbers without a country code are read as US/Canada numbers.';
  // Letters (e.g. "ext. 5") or free text around the number are refused, not silently dropped.
  if (typeof value !== 'string' || !PHONE_CHARS.test(value.trim())) throw invalid(`${field} is not a valid phone number.`, fix);
  const phone = parsePhoneNumberFromString(value.trim(), 'US');
  if (!phone || !phone.isPossible()) throw invalid(`${field} "${value}" is not a possible phone number.`, fix);
  return phone.number;
}

export function validateTimezone(value: unknown, field = 'timezone'): string {
  const fix = 'Use an IANA time zone name such as "America/New_York", "Europe/Paris" or "UTC".';
  // Offsets ("+02:00") are not IANA names even where Intl accepts them.
  if (typeof value !== 'string' || !/^[A-Za-z][A-Za-z0-9_+\-/]{0,63}$/.test(value)) throw invalid(`${field} "${String(value)}" is not an IANA time zone name.`, fix);
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
  } catch {
    throw invalid(`${field} "${value}" is not an IANA time zone name.`, fix);
  }
  return value;
}

/** A push token's `environment` (the spec): `production`, or `sandbox` / `undefined` for APNs development builds. */
const PUSH_ENVIRONMENTS: readonly unknown[] = ['production', 'sandbox', 'undefined'];

const propertyError = (message: string) => new AppError('PROPERTY_LIMIT_EXCEEDED', message, FIX_PROPERTIES);

/** The limits of the spec, checked on the input and again on the merged result. */
export function checkPropertyLimits(properties: Record<string, unknown>, field = 'properties'): Properties {
  const keys = Object.keys(properties);
  if (keys.length > PROPERTY_LIMITS.keys) throw propertyError(`${field} has ${keys.length} keys; at most ${PROPERTY_LIMITS.keys} are allowed.`);
  for (const key of keys) {
    if (key.length < 1 || characterCount(key) > PROPERTY_LIMITS.keyLength) {
      throw propertyError(`${field} key "${key.slice(0, 80)}" must be 1 to ${PROPERTY_LIMITS.keyLength} characters.`);
    }
    const value = properties[key];
    if (typeof value === 'string') {
      const characters = characterCount(value);
      if (characters > PROPERTY_LIMITS.stringValueLength) {
        throw propertyError(`${field}.${key} is ${characters} characters; string values are limited to ${PROPERTY_LIMITS.stringValueLength}.`);
      }
    } else if (!(typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value)))) {
      throw propertyError(`${field}.${key} must be a string, a finite number or a boolean.`);
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(properties), 'utf8');
  if (bytes > PROPERTY_LIMITS.serializedBytes) {
    throw propertyError(`${field} serializes to ${bytes} bytes; at most ${PROPERTY_LIMITS.serializedBytes} (1 KB) are allowed.`);
  }
  return properties as Properties;
}

/** Input properties: like stored ones, except that null marks a key to delete. */
function parsePropertiesPatch(value: unknown): Record<string, PropertyValue | null> {
  if (!isObject(value)) throw invalid('properties must be an object of key -> string, number or boolean.', FIX_PROPERTIES);
  const entries = Object.entries(value);
  // Keys to delete still count, at twice the key limit, so one request stays bounded.
  if (entries.length > PROPERTY_LIMITS.keys * 2) throw propertyError(`properties has ${entries.length} keys; at most ${PROPERTY_LIMITS.keys} are allowed.`);
  const present = Object.fromEntries(entries.filter(([, v]) => v !== null));
  checkPropertyLimits(present);
  for (const [key] of entries) {
    if (key.length < 1 || characterCount(key) > PROPERTY_LIMITS.keyLength) throw propertyError(`properties key "${key.slice(0, 80)}" must be 1 to ${PROPERTY_LIMITS.keyLength} characters.`);
  }
  return value as Record<string, PropertyValue | null>;
}

const DEVICE_FIELDS = ['app_id', 'ad_id', 'device_id', 'platform', 'manufacturer', 'model'] as const;

export function parsePushToken(value: unknown, field: string): PushToken {
  const fix = 'Each push token is {type: "FCM"|"APN", token, device: {device_id, ...}, environment?}.';
  if (!isObject(value)) throw invalid(`${field} must be an object.`, fix);
  if (value.type !== 'FCM' && value.type !== 'APN') throw invalid(`${field}.type must be "FCM" or "APN".`, fix);
  if (typeof value.token !== 'string' || value.token.trim() === '' || value.token.length > 4096) {
    throw invalid(`${field}.token must be a non-empty string.`, fix);
  }
  if (!isObject(value.device)) throw invalid(`${field}.device must be an object with a device_id.`, fix);
  if (typeof value.device.device_id !== 'string' || value.device.device_id === '') {
    throw invalid(`${field}.device.device_id is required (a non-empty string).`, fix);
  }
  const device: PushToken['device'] = { device_id: value.device.device_id };
  for (const key of DEVICE_FIELDS) {
    const v = value.device[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw invalid(`${field}.device.${key} must be a string.`, fix);
    device[key] = v;
  }
  let environment = 'undefined';
  if (value.environment !== undefined && value.environment !== null) {
    // The spec's values only: a typo ("prod") would otherwise send a production app's pushes to the APNs sandbox.
    if (typeof value.environment !== 'string' || !PUSH_ENVIRONMENTS.includes(value.environment)) {
      throw invalid(`${field}.environment must be "production", "sandbox" or "undefined"; got ${JSON.stringify(value.environment).slice(0, 60)}.`, fix);
    }
    environment = value.environment;
  }
  return { type: value.type, token: value.token, device, environment };
}

const B64URL = /^[A-Za-z0-9_-]+={0,2}$/;

function decodeBase64Url(value: unknown): Buffer | null {
  if (typeof value !== 'string' || !B64URL.test(value)) return null;
  return Buffer.from(value.replace(/=+$/, ''), 'base64url');
}

function isLocalHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '127.0.0.1' || hostname === '[::1]';
}

export function parseWebPushToken(value: unknown, field: string): WebPushToken {
  const fix = 'Send the browser PushSubscription as JSON: {sub: {endpoint: "https://...", keys: {p256dh, auth}}}.';
  if (!isObject(value) || !isObject(value.sub)) throw invalid(`${field}.sub must be an object (a serialized PushSubscription).`, fix);
  const { endpoint, keys } = value.sub;
  let url: URL;
  try {
    url = new URL(String(endpoint));
  } catch {
    throw invalid(`${field}.sub.endpoint must be an https URL.`, fix);
  }
  if (typeof endpoint !== 'string' || !(url.protocol === 'https:' || (url.protocol === 'http:' && isLocalHost(url.hostname)))) {
    throw invalid(`${field}.sub.endpoint must be an https URL (http only for localhost).`, fix);
  }
  if (!isObject(keys)) throw invalid(`${field}.sub.keys must be an object with p256dh and auth.`, fix);
  const p256dh = decodeBase64Url(keys.p256dh);
  if (!p256dh || p256dh.length !== 65 || p256dh[0] !== 0x04 || !isP256Point(p256dh)) {
    throw invalid(`${field}.sub.keys.p256dh must be base64url of an uncompressed P-256 public key (65 bytes starting with 0x04).`, fix);
  }
  const auth = decodeBase64Url(keys.auth);
  if (!auth || auth.length !== 16) throw invalid(`${field}.sub.keys.auth must be base64url of 16 bytes.`, fix);
  return { sub: { endpoint, keys: { p256dh: keys.p256dh as string, auth: keys.auth as string } } };
}

/** A point off the curve would only fail later, at encryption time, for every notification. */
function isP256Point(point: Buffer): boolean {
  try {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    ecdh.computeSecret(point);
    return true;
  } catch {
    return false;
  }
}

function parseSlackToken(value: unknown): SlackToken {
  if (!isObject(value)) throw invalid('slackToken must be an object (the OAuth v2 access response).', 'Send the object returned by oauth.v2.access, or null to remove it.');
  if (value.ok !== undefined && typeof value.ok !== 'boolean') throw invalid('slackToken.ok must be a boolean.');
  if (value.access_token !== undefined && typeof value.access_token !== 'string') throw invalid('slackToken.access_token must be a string.');
  if (hasMaskedValue(value)) {
    throw invalid('slackToken carries a masked token (as reads show it), not the token itself.', 'Send the oauth.v2.access response as Slack returned it, or leave slackToken out to keep the stored one.');
  }
  return value;
}

function optionalString(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string' || characterCount(value) > max) throw invalid(`${field} must be a string of at most ${max} characters.`);
  return value;
}

/** Treat null (and an empty string, which the HTTP layer may coerce null to) as "clear this field". */
const clears = (v: unknown) => v === null || v === '';

/**
 * Turns raw identify input into a validated patch. Keys absent from the input stay absent
 * (= preserved on merge); null or "" values become null (= cleared).
 */
export function parseIdentifyInput(raw: unknown): IdentifyPatch {
  if (!isObject(raw)) throw invalid('The user must be a JSON object.', 'Send {id, email?, number?, ...}.');
  const patch: IdentifyPatch = {};
  if (raw.email !== undefined) patch.email = clears(raw.email) ? null : validateEmail(raw.email);
  if (raw.number !== undefined) patch.number = clears(raw.number) ? null : normalizePhoneNumber(raw.number);
  if (raw.timezone !== undefined) patch.timezone = clears(raw.timezone) ? null : validateTimezone(raw.timezone);
  if (raw.slackChannel !== undefined) patch.slackChannel = clears(raw.slackChannel) ? null : optionalString(raw.slackChannel, 'slackChannel', 256);
  if (raw.slackToken !== undefined) patch.slackToken = raw.slackToken === null ? null : parseSlackToken(raw.slackToken);
  if (raw.pushTokens !== undefined && raw.pushTokens !== null) {
    if (!Array.isArray(raw.pushTokens)) throw invalid('pushTokens must be an array.');
    if (raw.pushTokens.length > 100) throw invalid('pushTokens may hold at most 100 tokens.');
    patch.pushTokens = dedupe(raw.pushTokens.map((t, i) => parsePushToken(t, `pushTokens[${i}]`)), (t) => `${t.type}:${t.token}`);
  } else if (raw.pushTokens === null) patch.pushTokens = null;
  if (raw.webPushTokens !== undefined && raw.webPushTokens !== null) {
    if (!Array.isArray(raw.webPushTokens)) throw invalid('webPushTokens must be an array.');
    if (raw.webPushTokens.length > 100) throw invalid('webPushTokens may hold at most 100 subscriptions.');
    patch.webPushTokens = dedupe(raw.webPushTokens.map((t, i) => parseWebPushToken(t, `webPushTokens[${i}]`)), (t) => t.sub.endpoint);
  } else if (raw.webPushTokens === null) patch.webPushTokens = null;
  if (raw.properties !== undefined && raw.properties !== null) patch.properties = parsePropertiesPatch(raw.properties);
  return patch;
}

/** Keeps the last occurrence of each key, in the order of last occurrence. */
function dedupe<T>(items: T[], key: (item: T) => string): T[] {
  const byKey = new Map<string, T>();
  for (const item of items) {
    const k = key(item);
    byKey.delete(k);
    byKey.set(k, item);
  }
  return [...byKey.values()];
}

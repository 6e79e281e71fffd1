/**
 * Telephony settings (README: Configuration). Parsed here and spread into Config by loadConfig, so
 * the channel's rules live beside the channel. Without Twilio credentials the built-in local
 * development carrier is used, so SMS and calls work on a laptop out of the box.
 */
export interface TelephonySettings {
  /** TWILIO_ACCOUNT_SID: the account whose REST API sends SMS and places calls. */
  twilioAccountSid?: string;
  /** TWILIO_AUTH_TOKEN: Basic password of the REST API and HMAC key of X-Twilio-Signature. */
  twilioAuthToken?: string;
  /** TWILIO_BASE_URL: base of the Twilio REST API (a Twilio-compatible gateway, a test peer). */
  twilioBaseUrl: string;
  /** TWILIO_REQUEST_TIMEOUT_MS: how long a REST request may take (default 60 s, see twilio-client.ts). */
  twilioRequestTimeoutMs?: number;
  /** CLARION_DEFAULT_SMS_FROM: shared E.164 sender for accounts that own no number. */
  defaultSmsFrom?: string;
  /** CLARION_DEV_CARRIER: the local development carrier; on by default when no Twilio credentials are set. */
  devCarrier: boolean;
}

export function telephonySettings(env: NodeJS.ProcessEnv, fail: (message: string) => Error): TelephonySettings {
  const sid = env.TWILIO_ACCOUNT_SID || undefined;
  const token = env.TWILIO_AUTH_TOKEN || undefined;
  if (Boolean(sid) !== Boolean(token)) throw fail('TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN must be set together');
  if (sid && !/^AC[0-9a-fA-F]{32}$/.test(sid)) throw fail(`TWILIO_ACCOUNT_SID must look like AC followed by 32 hex digits, got "${sid}"`);
  const base = env.TWILIO_BASE_URL || 'https://api.twilio.com';
  if (!/^https?:\/\/[^/]/.test(base)) throw fail(`TWILIO_BASE_URL must be an http(s) URL, got "${base}"`);
  const rawTimeout = env.TWILIO_REQUEST_TIMEOUT_MS || undefined;
  if (rawTimeout !== undefined && !/^[1-9]\d*$/.test(rawTimeout)) throw fail(`TWILIO_REQUEST_TIMEOUT_MS must be a positive number of milliseconds, got "${rawTimeout}"`);
  const from = env.CLARION_DEFAULT_SMS_FROM || undefined;
  if (from && !/^\+[1-9]\d{6,14}$/.test(from)) throw fail(`CLARION_DEFAULT_SMS_FROM must be an E.164 number like +14155550100, got "${from}"`);
  const rawDev = env.CLARION_DEV_CARRIER;
  let devCarrier = !sid;
  if (rawDev !== undefined && rawDev !== '') {
    if (/^(1|true|yes|on)$/i.test(rawDev)) devCarrier = true;
    else if (/^(0|false|no|off)$/i.test(rawDev)) devCarrier = false;
    else throw fail(`CLARION_DEV_CARRIER must be true or false, got "${rawDev}"`);
  }
  if (devCarrier && sid) throw fail('CLARION_DEV_CARRIER cannot be on while TWILIO_ACCOUNT_SID is set: messages would go to two carriers');
  return { twilioAccountSid: sid, twilioAuthToken: token, twilioBaseUrl: base.replace(/\/+$/, ''), ...(rawTimeout ? { twilioRequestTimeoutMs: Number(rawTimeout) } : {}), defaultSmsFrom: from, devCarrier };
}

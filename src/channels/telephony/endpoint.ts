import { createHmac } from 'node:crypto';
import type { Config } from '../../config.js';
import type { Secrets } from '../../secrets.js';
import { TwilioClient, type TwilioEndpoint } from './twilio-client.js';

/** Path prefix of the local development carrier inside Clarion (its REST base is `${publicBase}${DEV_CARRIER_PREFIX}`). */
export const DEV_CARRIER_PREFIX = '/dev-carrier';

/** Callback routes Clarion gives the carrier; they authenticate themselves with X-Twilio-Signature. */
export const CALLBACK_PATHS = {
  smsStatus: '/telephony/twilio/sms-status',
  callStatus: '/telephony/twilio/call-status',
  inbound: '/telephony/twilio/inbound',
} as const;

/** The address providers reach this server at (CLARION_PUBLIC_URL, else the listening address). */
export function publicBase(config: Pick<Config, 'publicUrl' | 'host' | 'port'>): string {
  const base = config.publicUrl ?? `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${config.port}`;
  return base.replace(/\/+$/, '');
}

/**
 * Credentials of the local development carrier. Derived from the server key (one-way), so every
 * process sharing the key agrees on them without storing anything, and nobody outside knows them.
 */
export function devCarrierCredentials(secrets: Pick<Secrets, 'jwtKey'>): { accountSid: string; authToken: string } {
  const derive = (label: string) => createHmac('sha256', secrets.jwtKey).update(`clarion-dev-carrier:${label}`).digest('hex').slice(0, 32);
  return { accountSid: `AC${derive('account-sid')}`, authToken: derive('auth-token') };
}

/** The carrier this server talks to: Twilio when configured, else the built-in development carrier. */
export function telephonyEndpoint(deps: { config: Config; secrets: Pick<Secrets, 'jwtKey'> }): (TwilioEndpoint & { dev: boolean }) | null {
  const { config } = deps;
  if (config.twilioAccountSid && config.twilioAuthToken) {
    return { accountSid: config.twilioAccountSid, authToken: config.twilioAuthToken, baseUrl: config.twilioBaseUrl, dev: false };
  }
  if (!config.devCarrier) return null;
  // Resolved when used, not at start-up: tests (and `PORT=0`) learn the listening address late.
  return { ...devCarrierCredentials(deps.secrets), get baseUrl() { return `${publicBase(config)}${DEV_CARRIER_PREFIX}`; }, dev: true };
}

export function telephonyClient(deps: { config: Config; secrets: Pick<Secrets, 'jwtKey'> }): TwilioClient | null {
  const endpoint = telephonyEndpoint(deps);
  return endpoint ? new TwilioClient(endpoint, { timeoutMs: deps.config.twilioRequestTimeoutMs }) : null;
}

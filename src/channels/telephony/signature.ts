import webhooks from 'twilio/lib/webhooks/webhooks.js';

/** A form body as Twilio signs it: repeated keys (MediaUrl, StatusCallbackEvent) become arrays. */
export type FormParams = Record<string, string | string[]>;

export function parseForm(body: string): FormParams {
  const params: FormParams = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const prev = params[key];
    params[key] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return params;
}

export function encodeForm(params: FormParams): string {
  const out = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) for (const v of Array.isArray(value) ? value : [value]) out.append(key, v);
  return out.toString();
}

/** X-Twilio-Signature: base64 HMAC-SHA1, keyed by the auth token, of the full URL followed by the sorted POST params. */
export function twilioSignature(authToken: string, url: string, params: FormParams): string {
  return webhooks.getExpectedTwilioSignature(authToken, url, params);
}

/** Verifies a signature the way Twilio's own library does (URL with and without the default port). */
export function verifyTwilioSignature(authToken: string, signature: string, url: string, params: FormParams): boolean {
  return webhooks.validateRequest(authToken, signature, url, params);
}

/** One string value of a form field (the first when repeated). */
export const field = (params: FormParams, name: string): string | undefined => {
  const v = params[name];
  return Array.isArray(v) ? v[0] : v;
};

import { createPrivateKey } from 'node:crypto';

/** Where Google's service-account files send token requests when they name none. */
export const GOOGLE_TOKEN_URI = 'https://oauth2.googleapis.com/token';
export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';

/** The fields of a Google service-account key file that FCM HTTP v1 needs. */
export interface FcmServiceAccount {
  projectId: string;
  clientEmail: string;
  /** PKCS#8 PEM of the RSA key. */
  privateKey: string;
  privateKeyId?: string;
  tokenUri: string;
}

/** Why an uploaded service-account JSON is not usable (the message is shown to the caller). */
export class FcmAccountError extends Error {}

// Google project ids: 6-30 lowercase letters, digits and hyphens, starting with a letter;
// older ones may carry a domain prefix ("example.com:project").
const PROJECT_ID = /^(?:[a-z0-9][a-z0-9.-]{0,62}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$/;
const EMAIL = /^[^\s@]{1,200}@[^\s@]{1,200}$/;

const str = (value: Record<string, unknown>, key: string): string | undefined => {
  const v = value[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new FcmAccountError(`"${key}" must be a string.`);
  return v;
};

/**
 * Parses and checks a service-account key file (the JSON downloaded from the Firebase console,
 * as a string or already parsed). The private key must be an RSA key; PKCS#1 keys are converted
 * to PKCS#8. `token_uri` must be https unless `allowInsecureTokenUri` (local test peers).
 */
export function parseServiceAccount(
  input: unknown,
  options: { allowInsecureTokenUri?: boolean } = {},
): { account: FcmServiceAccount; publicFields: Record<string, unknown> } {
  let value: unknown = input;
  if (typeof input === 'string') {
    try {
      value = JSON.parse(input);
    } catch {
      throw new FcmAccountError('fcmConfig is not valid JSON: paste the whole service-account key file.');
    }
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new FcmAccountError('fcmConfig must be a JSON object (a service-account key file).');
  }
  const obj = value as Record<string, unknown>;
  const type = str(obj, 'type');
  if (type !== undefined && type !== 'service_account') {
    throw new FcmAccountError(`"type" is "${type}"; FCM needs a key file of type "service_account".`);
  }
  const missing = ['project_id', 'client_email', 'private_key'].filter((k) => typeof obj[k] !== 'string' || obj[k] === '');
  if (missing.length) throw new FcmAccountError(`The service account is missing ${missing.map((k) => `"${k}"`).join(', ')}.`);

  const projectId = str(obj, 'project_id')!;
  if (!PROJECT_ID.test(projectId)) throw new FcmAccountError(`"project_id" "${projectId.slice(0, 100)}" is not a Google Cloud project id.`);
  const clientEmail = str(obj, 'client_email')!;
  if (!EMAIL.test(clientEmail)) throw new FcmAccountError('"client_email" is not an email address.');

  const pem = str(obj, 'private_key')!.replace(/\\n/g, '\n');
  let privateKey: string;
  try {
    const key = createPrivateKey({ key: pem, format: 'pem' });
    if (key.asymmetricKeyType !== 'rsa') throw new FcmAccountError(`"private_key" is an ${key.asymmetricKeyType} key; FCM service accounts use RSA keys.`);
    privateKey = key.export({ type: 'pkcs8', format: 'pem' }).toString();
  } catch (err) {
    if (err instanceof FcmAccountError) throw err;
    throw new FcmAccountError('"private_key" is not a PEM-encoded private key as in Google key files.');
  }

  const tokenUri = str(obj, 'token_uri') ?? GOOGLE_TOKEN_URI;
  let url: URL;
  try {
    url = new URL(tokenUri);
  } catch {
    throw new FcmAccountError('"token_uri" is not a URL.');
  }
  if (url.protocol !== 'https:' && !(options.allowInsecureTokenUri && url.protocol === 'http:')) {
    throw new FcmAccountError('"token_uri" must be an https URL.');
  }
  if (url.username || url.password) throw new FcmAccountError('"token_uri" must not carry credentials.');

  const privateKeyId = str(obj, 'private_key_id');
  const { private_key: _secret, ...rest } = obj;
  return {
    account: { projectId, clientEmail, privateKey, tokenUri: url.href, ...(privateKeyId ? { privateKeyId } : {}) },
    publicFields: { ...rest, token_uri: url.href },
  };
}

import type { Secrets } from '../../secrets.js';
import type { SlackToken } from './users.types.js';

/**
 * A user's slackToken (the OAuth v2 access response) holds bearer tokens for a Slack workspace,
 * so the column keeps it sealed with the server's key. Rows written before it was sealed hold the
 * JSON as given (it starts with "{"); they are read as they are and sealed on their next write
 * (migrations run without the server's key, so there is no data migration).
 */
const SEALED = 'enc:';

export type TokenSealer = Pick<Secrets, 'encrypt' | 'decrypt'>;

export function isSealedSlackToken(stored: string): boolean {
  return stored.startsWith(SEALED);
}

export function sealSlackToken(secrets: TokenSealer, json: string): string {
  return SEALED + secrets.encrypt(json);
}

/** The JSON of a stored slack_token column, sealed or not. */
export function openSlackToken(secrets: TokenSealer, stored: string | null): string | null {
  if (stored === null) return null;
  return isSealedSlackToken(stored) ? secrets.decrypt(stored.slice(SEALED.length)) : stored;
}

/**
 * The slack_token column for a new value: the stored one when it already seals the same JSON
 * (so a repeated identify or send writes nothing), else a fresh seal.
 */
export function nextSlackTokenColumn(secrets: TokenSealer, stored: string | null | undefined, json: string | null): string | null {
  if (json === null) return null;
  if (stored && isSealedSlackToken(stored) && openSlackToken(secrets, stored) === json) return stored;
  return sealSlackToken(secrets, json);
}

/** Keys of the OAuth response that hold credentials (token_type and the like do not). */
const SECRET_KEY = /token$|secret|^url$/i;
const NOT_SECRET = new Set(['token_type']);
const MASK = '…';

/** `xoxb-…abcd`: the token's kind and its last four characters, enough to tell tokens apart. */
export function maskSecret(value: string): string {
  const kind = /^[a-z]{3,5}-/i.exec(value)?.[0] ?? '';
  return value.length >= 16 ? `${kind}${MASK}${value.slice(-4)}` : `${kind}${MASK}`;
}

/** The token as reads show it: every credential in it masked, whatever its depth. */
export function maskSlackToken(token: SlackToken): SlackToken {
  const mask = (value: unknown, key: string): unknown => {
    if (typeof value === 'string') return SECRET_KEY.test(key) && !NOT_SECRET.has(key) ? maskSecret(value) : value;
    if (Array.isArray(value)) return value.map((v) => mask(v, key));
    if (value && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, mask(v, k)]));
    }
    return value;
  };
  return mask(token, '') as SlackToken;
}

/** Whether a credential in the token is a masked value (a read sent back as is), which must not replace the real one. */
export function hasMaskedValue(token: unknown, key = ''): boolean {
  if (typeof token === 'string') return SECRET_KEY.test(key) && !NOT_SECRET.has(key) && token.includes(MASK);
  if (Array.isArray(token)) return token.some((v) => hasMaskedValue(v, key));
  if (token && typeof token === 'object') return Object.entries(token as Record<string, unknown>).some(([k, v]) => hasMaskedValue(v, k));
  return false;
}

/**
 * The token to post with. A user's slackToken is the OAuth v2 access response of the
 * workspace that installed the app: its top-level `access_token` is the bot token (xoxb-) of
 * that workspace, `authed_user.access_token` the installing user's token (xoxp-), used only
 * when the install granted no bot token. Without either, the environment's bot token.
 */
export function userSlackToken(token: SlackToken | undefined): string | undefined {
  if (!token || token.ok === false) return undefined;
  const bot = typeof token.access_token === 'string' ? token.access_token.trim() : '';
  if (bot) return bot;
  const authed = token.authed_user as { access_token?: unknown } | undefined;
  const user = typeof authed?.access_token === 'string' ? authed.access_token.trim() : '';
  return user || undefined;
}

import { isIP } from 'node:net';
import path from 'node:path';
import { EnvError, cleanEnv, makeExactValidator } from 'envalid';
import { type TelephonySettings, telephonySettings } from './channels/telephony/settings.js';
import { parseKey } from './secrets.js';
import { INTEGER_COLUMN_MAX } from './storage/schema.js';

/** Every setting Clarion reads from the environment; parsed once at start-up (README: Configuration). */
export interface Config extends TelephonySettings {
  port: number;
  host: string;
  /** PostgreSQL connection string; absent means the embedded SQLite file in dataDir. */
  databaseUrl?: string;
  dataDir: string;
  /** 32+ byte key (hex or base64) that encrypts secrets at rest and signs JWTs; generated into dataDir when absent. */
  secretKey?: string;
  publicUrl?: string;
  logLevel: (typeof LOG_LEVELS)[number];
  role: 'all' | 'api' | 'worker';
  bodyLimitBytes: number;
  smtpUrl?: string;
  /** Lets outbound fetches of user-given URLs (attachments, environment SMTP servers) reach private/loopback addresses. */
  allowPrivateNetworks: boolean;
  /** Sender of email when neither the send nor its template names one. */
  defaultFromAddress: string;
  defaultFromName: string;
  /** A job whose worker stops renewing its lock (crash, kill -9) is taken over after this long. */
  jobLockSeconds: number;
  /** Percent of the time job runs may take while this process's API is saturated (role all; see BusyGate). */
  busyWorkerPercent: number;
  defaultMessagesCap: number;
  logRetentionDays: number;
  /** VAPID subject (mailto: or https: URL) push services may use to contact the sender; default derived from publicUrl or the default sender. */
  webPushSubject?: string;
  /** How long a push service keeps an undelivered web push (TTL header), in seconds. */
  webPushTtlSeconds: number;
  /** Urgency header of web pushes (RFC 8030): very-low, low, normal or high. */
  webPushUrgency: 'very-low' | 'low' | 'normal' | 'high';
  /** APNs gateway for tokens whose environment is 'production' (CLARION_APNS_PRODUCTION_URL). */
  apnsProductionUrl: string;
  /** APNs gateway for development builds' tokens (CLARION_APNS_SANDBOX_URL). */
  apnsSandboxUrl: string;
  /** PEM file of extra CA certificates trusted for the APNs gateways, beside the system roots (CLARION_APNS_CA_FILE). */
  apnsCaFile?: string;
  /** Base URL of the Slack Web API (method names are appended), e.g. a local Slack peer in tests. */
  slackApiUrl: string;
  /** How long a Slack Web API call may take before it is given up (and its delivery retried). */
  slackTimeoutMs: number;
  /** FCM HTTP v1 API base (CLARION_FCM_BASE_URL); server configuration, so not behind the SSRF guard. */
  fcmBaseUrl: string;
  /** A webhook attempt is a success only with a 2xx within this long (CLARION_WEBHOOK_TIMEOUT_SECONDS). */
  webhookTimeoutMs: number;
  /** Webhook requests in flight per worker process, all endpoints together. */
  webhookConcurrency: number;
  /** Webhook requests in flight per endpoint per worker process. */
  webhookEndpointConcurrency: number;
  /** How often a worker looks for new events and due webhook retries, in ms. */
  webhookPollMs: number;
  /** Port of the inbound SMTP server (CLARION_INBOUND_SMTP_PORT, default 2525); null: off (0 or 'off'). */
  inboundSmtpPort: number | null;
  /** Interface the inbound SMTP server listens on (CLARION_INBOUND_SMTP_HOST, default HOST). */
  inboundSmtpHost: string;
  /** Mail domain of built-in inbound addresses (prefix@domain). */
  inboundDomain: string;
  /** Largest inbound message accepted, in bytes (advertised with SIZE; larger ones get 552). */
  inboundMaxBytes: number;
  /** DNS server (`ip:port`, `[ipv6]:port` or a bare IP) sender-domain checks ask instead of the system's resolvers (CLARION_DNS_SERVER). */
  dnsServer?: string;
  /** Origins a browser may call the in-app routes from (CLARION_CORS_ORIGINS): any, none, or a list. */
  corsOrigins: '*' | 'off' | string[];
  /** Requests per window per credential (CLARION_RATE_LIMIT_PER_KEY); null: off. */
  rateLimitPerKey: number | null;
  /** Requests per window per client address (CLARION_RATE_LIMIT_PER_IP); null: off. */
  rateLimitPerIp: number | null;
  /** Length of a rate-limit window, in ms (CLARION_RATE_LIMIT_WINDOW, in seconds). */
  rateLimitWindowMs: number;
  /** Reverse proxies whose X-Forwarded-For names the client (CLARION_TRUST_PROXY): none, or their addresses. */
  trustProxy: false | string;
  /** Broadcast messages per second per account (CLARION_BROADCAST_RATE; docs/broadcasts.md "Rate"). */
  broadcastRate: number;
  /**
   * Broadcast messages per second per sender domain of an account (CLARION_BROADCAST_DOMAIN_RATE);
   * absent: no bound of its own (the account's rate bounds each domain).
   */
  broadcastDomainRate?: number;
  /**
   * At most this many of a broadcast's recipients handed over and not yet attempted
   * (CLARION_BROADCAST_MAX_IN_FLIGHT); absent: two seconds of the account's rate, at least 100.
   */
  broadcastMaxInFlight?: number;
  /** In-app websockets one environment may hold in a process (CLARION_INAPP_MAX_SOCKETS_PER_ENVIRONMENT); absent: MAX_SOCKETS_PER_ENVIRONMENT. */
  inappMaxSocketsPerEnvironment?: number;
  /** In-app websockets a process may hold (CLARION_INAPP_MAX_SOCKETS_PER_PROCESS); absent: defaultMaxSocketsPerProcess (inapp.socket-caps.ts). */
  inappMaxSocketsPerProcess?: number;
  /** The domain this server's mail leaves from, named in the SPF include and return-path CNAME of sender domains (CLARION_SENDING_DOMAIN). */
  sendingDomain: string;
}

/** Bad configuration: one line per variable, naming it and what it accepts (main.ts prints it and exits 2). */
export class ConfigError extends Error {}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * One setting: `parse` answers the value, or undefined when the text is not acceptable, and the
 * error then says what the variable `accepts`. Unset and empty both mean `fallback`.
 */
function setting<T>(accepts: string, parse: (raw: string) => T | undefined, fallback: T) {
  return makeExactValidator<T>((raw) => {
    if (raw.trim() === '') return fallback;
    const value = parse(raw.trim());
    if (value === undefined) throw new EnvError(`must be ${accepts}, got "${raw}"`);
    return value;
  })({ default: fallback as NonNullable<T>, desc: accepts });
}

/** A text setting without a default: '' when unset (envalid takes no null or undefined value; loadConfig reads '' as absent). */
function optional(accepts: string, parse: (raw: string) => string | undefined) {
  return setting<string>(accepts, parse, '');
}
const absentIfEmpty = (value: string): string | undefined => value || undefined;

const integer = (min: number, max = Number.MAX_SAFE_INTEGER) => (raw: string) => {
  const value = Number(raw);
  return Number.isInteger(value) && value >= min && value <= max ? value : undefined;
};
const int = (fallback: number, min = 0, max?: number) => setting(max === undefined ? `an integer >= ${min}` : `an integer from ${min} to ${max}`, integer(min, max), fallback);
const flag = (fallback: boolean) =>
  setting('true or false (also 1/0, yes/no, on/off)', (raw) => (/^(1|true|yes|on)$/i.test(raw) ? true : /^(0|false|no|off)$/i.test(raw) ? false : undefined), fallback);
const text = (fallback: string) => setting('a non-empty string', (raw) => raw, fallback);
const oneOf = <T extends string>(choices: readonly T[], fallback: T) => setting(`one of ${choices.join(', ')}`, (raw) => (choices.includes(raw as T) ? (raw as T) : undefined), fallback);

function httpUrl(raw: string): URL | undefined {
  try {
    const url = new URL(raw);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url : undefined;
  } catch {
    return undefined;
  }
}
const HTTP_URL = 'an http(s) URL';
const urlSetting = (fallback: string, shape: (url: URL) => string) => setting(HTTP_URL, (raw) => (httpUrl(raw) ? shape(httpUrl(raw)!) : undefined), shape(new URL(fallback)));

/** 32 bytes or more, decoded as the server will (secrets.ts). */
const secretKey = (raw: string): string | undefined => {
  try {
    parseKey(raw);
    return raw;
  } catch {
    return undefined;
  }
};

const DOMAIN = /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;
const domainName = (raw: string) => (DOMAIN.test(raw.toLowerCase()) ? raw.toLowerCase() : undefined);

/** CLARION_DNS_SERVER: an IP address with an optional port, in the form node's Resolver#setServers takes. */
function dnsServer(value: string): string | undefined {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3}))(?::(\d{1,5}))?$/.exec(value) ?? /^([0-9a-fA-F:]*:[0-9a-fA-F:.]*)()()$/.exec(value);
  const ip = match?.[1] || match?.[2];
  const port = match?.[3] ? Number(match[3]) : 53;
  return ip && isIP(ip) !== 0 && port >= 1 && port <= 65535 ? value : undefined;
}

/** `*`, `off`, or a comma-separated list of origins (scheme://host[:port]). */
function corsOrigins(raw: string): Config['corsOrigins'] | undefined {
  if (raw === '*' || /^off$/i.test(raw)) return raw === '*' ? '*' : 'off';
  const list = raw.split(',').map((o) => o.trim()).filter(Boolean);
  return list.length > 0 && list.every((o) => httpUrl(o)?.origin === o) ? list : undefined;
}

/** A count that may be turned off: 0 or off is 0 (envalid takes no null value; loadConfig reads 0 as off). */
const countOrOff = (fallback: number) => setting('an integer >= 1, or 0 or off to turn it off', (raw) => (/^(off|false|no)$/i.test(raw) ? 0 : integer(0)(raw)), fallback);
const offIfZero = (value: number): number | null => (value === 0 ? null : value);

/** An IPv4 or IPv6 address with an optional /prefix, or a name proxy-addr knows. */
function proxyAddress(entry: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) return true;
  const [ip, prefix, extra] = entry.split('/');
  const family = isIP(ip);
  if (family === 0 || extra !== undefined) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

/**
 * CLARION_TRUST_PROXY: off, or a comma-separated list of proxy addresses (Fastify's trustProxy; a
 * hop count is not offered: Fastify cannot check the nearest peer with one, and ignores it).
 */
function trustProxy(raw: string): Config['trustProxy'] | undefined {
  if (/^(off|false|no)$/i.test(raw)) return false;
  const list = raw.split(',').map((a) => a.trim());
  return list.every(proxyAddress) ? list.join(',') : undefined;
}

/** The environment variables Clarion reads, each with what it accepts (README: Configuration); envalid checks them all at once. */
const SPEC = {
  PORT: int(3000, 0, 65535),
  HOST: text('127.0.0.1'),
  DATABASE_URL: optional('a postgres:// URL (leave it unset for the embedded SQLite file)', (raw) => (/^postgres(ql)?:\/\/./.test(raw) ? raw : undefined)),
  CLARION_DATA_DIR: text('./data'),
  CLARION_SECRET_KEY: optional('a key of 32 bytes or more, as hex (64+ digits) or base64 (e.g. `openssl rand -hex 32`)', secretKey),
  CLARION_PUBLIC_URL: optional(HTTP_URL, (raw) => (httpUrl(raw) ? raw.replace(/\/+$/, '') : undefined)),
  LOG_LEVEL: oneOf(LOG_LEVELS, 'info'),
  CLARION_ROLE: oneOf(['all', 'api', 'worker'] as const, 'all'),
  // Inline attachments are ~4 MB raw each, i.e. ~5.4 MB of base64, so the default leaves room for a few.
  CLARION_BODY_LIMIT: int(25 * 1024 * 1024, 1024),
  SMTP_URL: optional('an smtp:// or smtps:// URL', (raw) => (/^smtps?:\/\/./i.test(raw) ? raw : undefined)),
  CLARION_ALLOW_PRIVATE_NETWORKS: flag(false),
  CLARION_DEFAULT_FROM_ADDRESS: setting('an email address', (raw) => (/^[^@\s]+@[^@\s]+$/.test(raw) ? raw : undefined), 'notifications@clarion.localhost'),
  CLARION_DEFAULT_FROM_NAME: text('Clarion'),
  CLARION_JOB_LOCK_SECONDS: int(30, 1),
  CLARION_BUSY_WORKER_PERCENT: setting('a percentage from 1 to 100', integer(1, 100), 5),
  CLARION_DEFAULT_MESSAGES_CAP: int(1_000_000, 0, INTEGER_COLUMN_MAX),
  CLARION_LOG_RETENTION_DAYS: int(30, 1),
  CLARION_WEB_PUSH_SUBJECT: optional('a mailto: address or an https: URL', (raw) => (/^mailto:[^@\s]+@[^@\s]+$/.test(raw) || /^https:\/\/[^/\s]/.test(raw) ? raw : undefined)),
  CLARION_WEB_PUSH_TTL: int(86_400, 0),
  CLARION_WEB_PUSH_URGENCY: oneOf(['very-low', 'low', 'normal', 'high'] as const, 'normal'),
  // APNs gateways: scheme, host and port only (https, or http for an h2c peer).
  CLARION_APNS_PRODUCTION_URL: urlSetting('https://api.push.apple.com', (url) => url.origin),
  CLARION_APNS_SANDBOX_URL: urlSetting('https://api.sandbox.push.apple.com', (url) => url.origin),
  CLARION_APNS_CA_FILE: optional('a file path', (raw) => raw),
  CLARION_SLACK_API_URL: urlSetting('https://slack.com/api/', (url) => (url.href.endsWith('/') ? url.href : `${url.href}/`)),
  CLARION_SLACK_TIMEOUT_SECONDS: int(60, 1),
  CLARION_FCM_BASE_URL: urlSetting('https://fcm.googleapis.com', (url) => url.href.replace(/\/+$/, '')),
  CLARION_WEBHOOK_TIMEOUT_SECONDS: int(15, 1),
  CLARION_WEBHOOK_CONCURRENCY: int(64, 1),
  CLARION_WEBHOOK_ENDPOINT_CONCURRENCY: int(8, 1),
  CLARION_WEBHOOK_POLL_MS: int(250, 10),
  CLARION_INBOUND_SMTP_PORT: setting('a port (1-65535), or 0 or off to turn it off', (raw) => (/^(off|false|no)$/i.test(raw) ? 0 : integer(0, 65535)(raw)), 2525),
  CLARION_INBOUND_SMTP_HOST: optional('an interface address', (raw) => raw),
  CLARION_INBOUND_DOMAIN: setting('a domain name', domainName, 'inbound.localhost'),
  CLARION_INBOUND_MAX_BYTES: int(10 * 1024 * 1024, 1024),
  CLARION_DNS_SERVER: optional('an IP address with an optional port (127.0.0.1:5353, [::1]:5353)', dnsServer),
  CLARION_SENDING_DOMAIN: optional('a domain name', domainName),
  CLARION_CORS_ORIGINS: setting<Config['corsOrigins']>('*, off, or a comma-separated list of origins such as https://app.example.com', corsOrigins, '*'),
  CLARION_RATE_LIMIT_PER_KEY: countOrOff(30_000),
  CLARION_RATE_LIMIT_PER_IP: countOrOff(60_000),
  CLARION_RATE_LIMIT_WINDOW: int(60, 1, 86_400),
  CLARION_BROADCAST_RATE: int(100, 1, 100_000),
  // 0 (unset): no domain bound of its own (envalid takes no undefined value; loadConfig reads 0 as absent).
  CLARION_BROADCAST_DOMAIN_RATE: setting('an integer from 1 to 100000', integer(1, 100_000), 0),
  CLARION_BROADCAST_MAX_IN_FLIGHT: setting('an integer from 1 to 10000000', integer(1, 10_000_000), 0),
  // 0 (unset): the defaults of inapp.socket-caps.ts (the process's one depends on its open-file limit).
  CLARION_INAPP_MAX_SOCKETS_PER_ENVIRONMENT: setting('an integer from 1 to 10000000', integer(1, 10_000_000), 0),
  CLARION_INAPP_MAX_SOCKETS_PER_PROCESS: setting('an integer from 1 to 10000000', integer(1, 10_000_000), 0),
  CLARION_TRUST_PROXY: setting<Config['trustProxy']>('off, or a comma-separated list of proxy addresses (10.0.0.1, 10.0.0.0/8, loopback)', trustProxy, false),
};

/**
 * Reads and checks every setting at once: a bad value anywhere is a ConfigError listing each bad
 * variable on its own line (envalid's reporter hands them all over; its own would print and exit).
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const problems: string[] = [];
  const e = cleanEnv(env, SPEC, {
    reporter: ({ errors }) => {
      for (const [name, error] of Object.entries(errors)) if (error) problems.push(`${name} ${error.message}`);
    },
  });
  let telephony: TelephonySettings | undefined;
  try {
    telephony = telephonySettings(env, (message) => new ConfigError(message));
  } catch (err) {
    problems.push((err as Error).message);
  }
  if (problems.length || !telephony) throw new ConfigError(problems.join('\n'));
  const inboundPort = e.CLARION_INBOUND_SMTP_PORT;
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: absentIfEmpty(e.DATABASE_URL),
    dataDir: path.resolve(e.CLARION_DATA_DIR),
    secretKey: absentIfEmpty(e.CLARION_SECRET_KEY),
    publicUrl: absentIfEmpty(e.CLARION_PUBLIC_URL),
    logLevel: e.LOG_LEVEL,
    role: e.CLARION_ROLE,
    bodyLimitBytes: e.CLARION_BODY_LIMIT,
    smtpUrl: absentIfEmpty(e.SMTP_URL),
    allowPrivateNetworks: e.CLARION_ALLOW_PRIVATE_NETWORKS,
    defaultFromAddress: e.CLARION_DEFAULT_FROM_ADDRESS,
    defaultFromName: e.CLARION_DEFAULT_FROM_NAME,
    jobLockSeconds: e.CLARION_JOB_LOCK_SECONDS,
    busyWorkerPercent: e.CLARION_BUSY_WORKER_PERCENT,
    defaultMessagesCap: e.CLARION_DEFAULT_MESSAGES_CAP,
    logRetentionDays: e.CLARION_LOG_RETENTION_DAYS,
    ...telephony,
    webPushSubject: absentIfEmpty(e.CLARION_WEB_PUSH_SUBJECT),
    webPushTtlSeconds: e.CLARION_WEB_PUSH_TTL,
    webPushUrgency: e.CLARION_WEB_PUSH_URGENCY,
    apnsProductionUrl: e.CLARION_APNS_PRODUCTION_URL,
    apnsSandboxUrl: e.CLARION_APNS_SANDBOX_URL,
    apnsCaFile: absentIfEmpty(e.CLARION_APNS_CA_FILE),
    slackApiUrl: e.CLARION_SLACK_API_URL,
    slackTimeoutMs: e.CLARION_SLACK_TIMEOUT_SECONDS * 1000,
    fcmBaseUrl: e.CLARION_FCM_BASE_URL,
    webhookTimeoutMs: e.CLARION_WEBHOOK_TIMEOUT_SECONDS * 1000,
    webhookConcurrency: e.CLARION_WEBHOOK_CONCURRENCY,
    webhookEndpointConcurrency: e.CLARION_WEBHOOK_ENDPOINT_CONCURRENCY,
    webhookPollMs: e.CLARION_WEBHOOK_POLL_MS,
    inboundSmtpPort: inboundPort === 0 ? null : inboundPort,
    inboundSmtpHost: e.CLARION_INBOUND_SMTP_HOST || e.HOST,
    inboundDomain: e.CLARION_INBOUND_DOMAIN,
    inboundMaxBytes: e.CLARION_INBOUND_MAX_BYTES,
    dnsServer: absentIfEmpty(e.CLARION_DNS_SERVER),
    corsOrigins: e.CLARION_CORS_ORIGINS,
    rateLimitPerKey: offIfZero(e.CLARION_RATE_LIMIT_PER_KEY),
    rateLimitPerIp: offIfZero(e.CLARION_RATE_LIMIT_PER_IP),
    rateLimitWindowMs: e.CLARION_RATE_LIMIT_WINDOW * 1000,
    broadcastRate: e.CLARION_BROADCAST_RATE,
    ...(e.CLARION_BROADCAST_DOMAIN_RATE ? { broadcastDomainRate: e.CLARION_BROADCAST_DOMAIN_RATE } : {}),
    ...(e.CLARION_BROADCAST_MAX_IN_FLIGHT ? { broadcastMaxInFlight: e.CLARION_BROADCAST_MAX_IN_FLIGHT } : {}),
    ...(e.CLARION_INAPP_MAX_SOCKETS_PER_ENVIRONMENT ? { inappMaxSocketsPerEnvironment: e.CLARION_INAPP_MAX_SOCKETS_PER_ENVIRONMENT } : {}),
    ...(e.CLARION_INAPP_MAX_SOCKETS_PER_PROCESS ? { inappMaxSocketsPerProcess: e.CLARION_INAPP_MAX_SOCKETS_PER_PROCESS } : {}),
    trustProxy: e.CLARION_TRUST_PROXY,
    sendingDomain: e.CLARION_SENDING_DOMAIN || (domainName(e.CLARION_DEFAULT_FROM_ADDRESS.split('@').pop() ?? '') ?? 'clarion.localhost'),
  };
}

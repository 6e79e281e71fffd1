import { isIP } from 'node:net';
import path from 'node:path';
import { type TelephonySettings, telephonySettings } from './channels/telephony/settings.js';

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
  logLevel: string;
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
  /** The domain this server's mail leaves from, named in the SPF include and return-path CNAME of sender domains (CLARION_SENDING_DOMAIN). */
  sendingDomain: string;
}

export class ConfigError extends Error {}

function bool(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new ConfigError(`${name} must be an integer >= ${min}, got "${raw}"`);
  return value;
}

function percent(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = int(env, name, fallback, 1);
  if (value > 100) throw new ConfigError(`${name} must be a percentage from 1 to 100, got "${env[name]}"`);
  return value;
}

function slackApiUrl(raw: string | undefined): string {
  const value = raw || 'https://slack.com/api/';
  if (!/^https?:\/\/[^/]/.test(value)) throw new ConfigError(`CLARION_SLACK_API_URL must be an http(s) URL, got "${value}"`);
  return value.endsWith('/') ? value : `${value}/`;
}

/** An http(s) URL setting, parsed; `fallback` when unset. */
function parseHttpUrl(env: NodeJS.ProcessEnv, name: string, fallback: string): URL {
  const raw = env[name];
  let url: URL | undefined;
  try {
    url = new URL(raw === undefined || raw === '' ? fallback : raw);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) throw new ConfigError(`${name} must be an http(s) URL, got "${raw}"`);
  return url;
}

/** An APNs gateway: scheme, host and port only (https, or http for an h2c peer). */
function apnsOrigin(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  return parseHttpUrl(env, name, fallback).origin;
}

/** A base URL without a trailing slash. */
function httpUrl(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  return parseHttpUrl(env, name, fallback).href.replace(/\/+$/, '');
}

function webPushSubject(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  if (!/^mailto:[^@\s]+@[^@\s]+$/.test(raw) && !/^https:\/\/[^/\s]/.test(raw)) {
    throw new ConfigError(`CLARION_WEB_PUSH_SUBJECT must be a mailto: address or an https: URL, got "${raw}"`);
  }
  return raw;
}

function webPushUrgency(raw: string | undefined): Config['webPushUrgency'] {
  const value = raw || 'normal';
  if (value !== 'very-low' && value !== 'low' && value !== 'normal' && value !== 'high') {
    throw new ConfigError(`CLARION_WEB_PUSH_URGENCY must be very-low, low, normal or high, got "${value}"`);
  }
  return value;
}

function inboundSmtpPort(env: NodeJS.ProcessEnv): number | null {
  const raw = env.CLARION_INBOUND_SMTP_PORT;
  if (raw !== undefined && /^(off|false|no)$/i.test(raw.trim())) return null;
  const port = int(env, 'CLARION_INBOUND_SMTP_PORT', 2525, 0);
  if (port > 65535) throw new ConfigError(`CLARION_INBOUND_SMTP_PORT must be a port (1-65535), 0 or off, got "${raw}"`);
  return port === 0 ? null : port;
}

function domainName(name: string, raw: string): string {
  const value = raw.trim().toLowerCase();
  if (!/^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/.test(value)) {
    throw new ConfigError(`${name} must be a domain name, got "${raw}"`);
  }
  return value;
}

const mailDomain = (raw: string | undefined) => domainName('CLARION_INBOUND_DOMAIN', raw || 'inbound.localhost');

/** CLARION_DNS_SERVER: an IP address with an optional port, in the form node's Resolver#setServers takes. */
function dnsServer(raw: string | undefined): string | undefined {
  const value = raw?.trim();
  if (!value) return undefined;
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3}))(?::(\d{1,5}))?$/.exec(value) ?? /^([0-9a-fA-F:]*:[0-9a-fA-F:.]*)()()$/.exec(value);
  const ip = match?.[1] || match?.[2];
  const port = match?.[3] ? Number(match[3]) : 53;
  if (!ip || isIP(ip) === 0 || port < 1 || port > 65535) {
    throw new ConfigError(`CLARION_DNS_SERVER must be an IP address with an optional port (127.0.0.1:5353, [::1]:5353), got "${raw}"`);
  }
  return value;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const role = env.CLARION_ROLE ?? 'all';
  if (role !== 'all' && role !== 'api' && role !== 'worker') {
    throw new ConfigError(`CLARION_ROLE must be all, api or worker, got "${role}"`);
  }
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// URL (leave it unset for the embedded SQLite file)');
  }
  return {
    port: int(env, 'PORT', 3000, 0),
    host: env.HOST || '127.0.0.1',
    databaseUrl,
    dataDir: path.resolve(env.CLARION_DATA_DIR || './data'),
    secretKey: env.CLARION_SECRET_KEY || undefined,
    publicUrl: env.CLARION_PUBLIC_URL || undefined,
    logLevel: env.LOG_LEVEL || 'info',
    role,
    // Inline attachments are ~4 MB raw each, i.e. ~5.4 MB of base64, so the default leaves room for a few.
    bodyLimitBytes: int(env, 'CLARION_BODY_LIMIT', 25 * 1024 * 1024, 1024),
    smtpUrl: env.SMTP_URL || undefined,
    allowPrivateNetworks: bool(env, 'CLARION_ALLOW_PRIVATE_NETWORKS', false),
    defaultFromAddress: env.CLARION_DEFAULT_FROM_ADDRESS || 'notifications@clarion.localhost',
    defaultFromName: env.CLARION_DEFAULT_FROM_NAME || 'Clarion',
    jobLockSeconds: int(env, 'CLARION_JOB_LOCK_SECONDS', 30, 1),
    busyWorkerPercent: percent(env, 'CLARION_BUSY_WORKER_PERCENT', 5),
    defaultMessagesCap: int(env, 'CLARION_DEFAULT_MESSAGES_CAP', 1_000_000, 0),
    logRetentionDays: int(env, 'CLARION_LOG_RETENTION_DAYS', 30, 1),
    ...telephonySettings(env, (message) => new ConfigError(message)),
    webPushSubject: webPushSubject(env.CLARION_WEB_PUSH_SUBJECT),
    webPushTtlSeconds: int(env, 'CLARION_WEB_PUSH_TTL', 86_400, 0),
    webPushUrgency: webPushUrgency(env.CLARION_WEB_PUSH_URGENCY),
    apnsProductionUrl: apnsOrigin(env, 'CLARION_APNS_PRODUCTION_URL', 'https://api.push.apple.com'),
    apnsSandboxUrl: apnsOrigin(env, 'CLARION_APNS_SANDBOX_URL', 'https://api.sandbox.push.apple.com'),
    apnsCaFile: env.CLARION_APNS_CA_FILE || undefined,
    slackApiUrl: slackApiUrl(env.CLARION_SLACK_API_URL),
    fcmBaseUrl: httpUrl(env, 'CLARION_FCM_BASE_URL', 'https://fcm.googleapis.com'),
    webhookTimeoutMs: int(env, 'CLARION_WEBHOOK_TIMEOUT_SECONDS', 15, 1) * 1000,
    webhookConcurrency: int(env, 'CLARION_WEBHOOK_CONCURRENCY', 64, 1),
    webhookEndpointConcurrency: int(env, 'CLARION_WEBHOOK_ENDPOINT_CONCURRENCY', 8, 1),
    webhookPollMs: int(env, 'CLARION_WEBHOOK_POLL_MS', 250, 10),
    inboundSmtpPort: inboundSmtpPort(env),
    inboundSmtpHost: env.CLARION_INBOUND_SMTP_HOST || env.HOST || '127.0.0.1',
    inboundDomain: mailDomain(env.CLARION_INBOUND_DOMAIN),
    inboundMaxBytes: int(env, 'CLARION_INBOUND_MAX_BYTES', 10 * 1024 * 1024, 1024),
    dnsServer: dnsServer(env.CLARION_DNS_SERVER),
    sendingDomain: domainName(
      'CLARION_SENDING_DOMAIN',
      env.CLARION_SENDING_DOMAIN || (env.CLARION_DEFAULT_FROM_ADDRESS || 'notifications@clarion.localhost').split('@').pop() || 'clarion.localhost',
    ),
  };
}

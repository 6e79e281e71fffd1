import { createRequire } from 'node:module';
import type * as SlackWebApi from '@slack/web-api';
import type { Logger as SlackLogger, WebClient } from '@slack/web-api';
import type { Logger } from 'pino';
import { DeliveryError } from '../types.js';

const require = createRequire(import.meta.url);
/**
 * @slack/web-api (and axios under it), loaded when Slack is first called: some 5 MB of heap that a
 * process whose environments never use Slack would otherwise hold from start (docs/memory.md).
 */
const slackWebApi = () => require('@slack/web-api') as typeof SlackWebApi;

export interface SlackClientOptions {
  /** Web API base URL, method names appended (https://slack.com/api/ or a local peer). */
  apiUrl: string;
  logger: Logger;
  /** Per-request timeout; a timed-out call is retried by the delivery engine. */
  timeoutMs?: number;
}

/** WebClients keyed by token; a bounded map since every workspace (token) gets its own. */
const MAX_CLIENTS = 500;

/**
 * One WebClient per token, all on one API base URL. The token goes in the Authorization header
 * only (a per-call `token` argument would also be sent in the form body). The client never
 * retries (the delivery engine owns retries and their schedule) and turns a 429 into an error
 * that carries Retry-After, instead of sleeping on it.
 */
export class SlackClients {
  private readonly clients = new Map<string, WebClient>();
  private readonly slackLogger: SlackLogger;

  constructor(private readonly options: SlackClientOptions) {
    this.slackLogger = pinoSlackLogger(options.logger);
  }

  get apiUrl(): string {
    return this.options.apiUrl;
  }

  for(token: string): WebClient {
    let client = this.clients.get(token);
    if (client) {
      // Most recently used last, so the oldest is the one dropped.
      this.clients.delete(token);
      this.clients.set(token, client);
      return client;
    }
    client = this.build(token);
    this.clients.set(token, client);
    if (this.clients.size > MAX_CLIENTS) this.clients.delete(this.clients.keys().next().value as string);
    return client;
  }

  /** A client without a token: for the methods an app calls with its own credentials (oauth.v2.access). */
  withoutToken(): WebClient {
    return this.build(undefined);
  }

  private build(token: string | undefined): WebClient {
    return new (slackWebApi().WebClient)(token, {
      slackApiUrl: this.options.apiUrl,
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      timeout: this.options.timeoutMs ?? REQUEST_TIMEOUT_MS,
      allowAbsoluteUrls: false,
      logger: this.slackLogger,
    });
  }
}

/**
 * How long a Web API call may take by default (CLARION_SLACK_TIMEOUT_SECONDS). Long, because a
 * chat.postMessage given up on is not unposted: its retry first looks for the message
 * (posted-lookup.ts), which needs the history scopes; without them it posts again. A slow call
 * holds no routing slot (the delivery is handed over after the first-attempt budget).
 */
export const REQUEST_TIMEOUT_MS = 60_000;

/** Slack's answers that a later attempt may not get (their own server trouble). */
const TRANSIENT_SLACK_ERRORS = new Set(['internal_error', 'fatal_error', 'service_unavailable', 'request_timeout', 'ratelimited', 'rate_limited']);

/** Slack's own errors after which the message may have been posted all the same. */
const MAYBE_POSTED_SLACK_ERRORS = new Set(['internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

/**
 * Whether a failed attempt, by the code it was recorded with (providerCode, else code, of the
 * DeliveryError toDeliveryError made), may have posted its message: no answer (a timeout, a lost
 * connection), a 5xx or 408, Slack's own trouble, or ok without a ts. A refusal (channel_not_found,
 * a rate limit, ...) posted nothing. A failure before chat.postMessage (conversations.open timing
 * out) counts too: the lookup it causes is one read.
 */
export function outcomeUnknown(recordedCode: string | null): boolean {
  if (!recordedCode) return false;
  if (recordedCode === 'NETWORK_ERROR' || recordedCode === 'SLACK_REQUEST_FAILED' || recordedCode === 'SLACK_BAD_RESPONSE') return true;
  if (/^(5\d\d|408)$/.test(recordedCode)) return true;
  return MAYBE_POSTED_SLACK_ERRORS.has(recordedCode);
}

/**
 * Maps what the WebClient threw to a DeliveryError. Slack's own error strings (channel_not_found,
 * invalid_auth, ...) become the failed code as Slack spelled them; rate limits and transport
 * failures are retryable, with Retry-After honoured.
 */
export function toDeliveryError(err: unknown, method: string, context = ''): DeliveryError {
  const e = err as { code?: string; data?: { error?: string; needed?: string }; retryAfter?: number; statusCode?: number; message?: string; original?: Error };
  const where = context ? ` (${context})` : '';
  const { ErrorCode } = slackWebApi();
  switch (e?.code) {
    case ErrorCode.RateLimitedError: {
      const seconds = typeof e.retryAfter === 'number' && Number.isFinite(e.retryAfter) ? Math.max(0, e.retryAfter) : undefined;
      return new DeliveryError('ratelimited', `${method}: rate limited by Slack${seconds !== undefined ? `, retry after ${seconds} s` : ''}${where}`, {
        retryable: true,
        providerCode: '429',
        ...(seconds !== undefined ? { retryAfterMs: seconds * 1000 } : {}),
      });
    }
    case ErrorCode.PlatformError: {
      const code = String(e.data?.error ?? 'unknown_error');
      const needed = e.data?.needed ? `, needs scope ${e.data.needed}` : '';
      return new DeliveryError(code, `${method}: ${code}${needed}${where}`, { retryable: TRANSIENT_SLACK_ERRORS.has(code), providerCode: code });
    }
    case ErrorCode.HTTPError: {
      const status = e.statusCode ?? 0;
      return new DeliveryError('HTTP_ERROR', `${method}: HTTP ${status} from the Slack API${where}`, { retryable: status >= 500 || status === 408, providerCode: String(status) });
    }
    case ErrorCode.RequestError:
      return new DeliveryError('NETWORK_ERROR', `${method}: ${e.original?.message ?? e.message ?? 'request failed'}${where}`, { retryable: true });
    default:
      // e.g. a 429 without a usable Retry-After: the engine's own backoff applies.
      return new DeliveryError('SLACK_REQUEST_FAILED', `${method}: ${e?.message ?? String(err)}${where}`, { retryable: true });
  }
}

/** Routes the WebClient's logging into pino. Its debug lines carry request bodies (message text): dropped. */
function pinoSlackLogger(logger: Logger): SlackLogger {
  const child = logger.child({ component: 'slack-web-api' });
  const text = (msg: unknown[]) => msg.map((m) => (typeof m === 'string' ? m : JSON.stringify(m))).join(' ');
  return {
    debug: () => {},
    info: (...msg: unknown[]) => child.debug(text(msg)),
    warn: (...msg: unknown[]) => child.warn(text(msg)),
    error: (...msg: unknown[]) => child.error(text(msg)),
    setLevel: () => {},
    getLevel: () => slackWebApi().LogLevel.WARN,
    setName: () => {},
  };
}

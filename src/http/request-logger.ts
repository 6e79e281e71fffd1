import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions } from 'fastify/types/logger.js';
import type { Logger } from 'pino';
import { jsonString } from '../json-text.js';
import type { App } from './types.js';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * Fastify's childLoggerFactory: a request's child logger (bound to its trackingId) is built on
 * its first enabled log line, not for every request. Building a pino child (bindings serialized,
 * redaction set up) cost about 10 µs per request, measured on POST /send, while at the default
 * level most requests never log. Route-level log settings get the real child at once.
 */
export function lazyChildLogger(logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  if (options.level !== undefined || options.serializers !== undefined) return logger.child(bindings, options);
  return new LazyChildLogger(logger, bindings);
}

class LazyChildLogger {
  private real: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
  ) {}

  get level(): string {
    return this.real?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.materialize().level = level;
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.materialize().child(bindings, options);
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}

  private write(level: Level, args: unknown[]): void {
    if (!this.real && !this.enabled(level)) return;
    // pino's LogFn is overloaded; tsc needs the one rest signature to spread `args` into it.
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- tsc needs it (above)
    (this.materialize()[level] as (...a: unknown[]) => void)(...args);
  }

  private enabled(level: Level): boolean {
    const parent = this.parent as FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };
    return parent.isLevelEnabled ? parent.isLevelEnabled(level) : true;
  }

  private materialize(): FastifyBaseLogger {
    this.real ??= this.parent.child(this.bindings);
    return this.real;
  }
}

/** Query parameters whose values are credentials (in-app user hashes, tokens, signatures, OAuth codes). */
const CREDENTIAL_PARAM = /hash|token|secret|key|sig|password|passwd|credential|auth|session|^code$|^state$/i;
/**
 * Paths whose last segment is a capability: the signed token of an email open, a tracked click
 * or a one-click unsubscribe (modules/engagement). Whoever reads the logs must not be able to
 * replay them, e.g. unsubscribe any tenant's users.
 */
const TOKEN_PATH = /^(\/(?:e\/open|e\/click|unsubscribe)\/)[^/?#]+/;

/**
 * The request URL with the values of credential-bearing query parameters and the token of a
 * capability path replaced, for logs: the in-app websocket and REST clients carry `userIdHash`
 * in the query string, Slack's OAuth callback its `state`. Other URLs without a query string
 * (most requests) are returned as they are.
 */
export function redactUrl(url: string): string {
  if (url.startsWith('/e/') || url.startsWith('/unsubscribe/')) url = url.replace(TOKEN_PATH, '$1[REDACTED]');
  const q = url.indexOf('?');
  if (q === -1) return url;
  const params = url.slice(q + 1).split('&');
  let changed = false;
  for (let i = 0; i < params.length; i++) {
    const param = params[i];
    const eq = param.indexOf('=');
    if (eq === -1) continue;
    let name = param.slice(0, eq);
    try {
      name = decodeURIComponent(name.replace(/\+/g, ' '));
    } catch {
      // a malformed escape in a name: judge the raw text
    }
    if (!CREDENTIAL_PARAM.test(name)) continue;
    params[i] = `${param.slice(0, eq)}=[REDACTED]`;
    changed = true;
  }
  return changed ? `${url.slice(0, q)}?${params.join('&')}` : url;
}

interface LoggedRequest {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * pino serializers for the root logger; they take precedence over Fastify's own `req` serializer,
 * which would log the URL with its query string as received.
 */
export const requestLogSerializers = {
  req: loggedRequest,
};

/** What a log line tells of a request: never its headers, its URL with credentials redacted. */
function loggedRequest(req: LoggedRequest) {
  return { method: req.method, url: redactUrl(req.url), host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort };
}

/** Writes the request lines: the one a request completes with, and the one a websocket upgrade starts with. */
export interface RequestLines {
  enabled(): boolean;
  completed(request: LoggedRequest & { id: string }, statusCode: number, responseTime: number): void;
  upgrade(request: LoggedRequest & { id: string }): void;
}

const COMPLETED = 'request completed';
const UPGRADE = 'websocket upgrade';

/**
 * Request lines through a pino logger: a child without the root's path redaction and with
 * loggedRequest as its `req` serializer. Every field of these lines is built here or by
 * loggedRequest (no headers, no body, the URL's credentials already replaced), so no redacted
 * path (authorization, apiKey, password...) can occur in them, and the wildcard paths
 * (`*.apiKey`) made the root logger walk every line's objects: about 5 of the 10 µs a line cost
 * (measured into a pipe, pino 9). For loggers this module did not see made (tests' own).
 */
export function pinoRequestLines(logger: Pick<Logger, 'child' | 'isLevelEnabled'>): RequestLines {
  const lines = logger.child({}, { redact: [], serializers: requestLogSerializers });
  return {
    enabled: () => lines.isLevelEnabled('info'),
    completed: (request, statusCode, responseTime) => lines.info({ trackingId: request.id, req: request, res: { statusCode }, responseTime }, COMPLETED),
    upgrade: (request) => lines.info({ trackingId: request.id, req: request }, UPGRADE),
  };
}

/**
 * The same lines, written as text straight to the logger's destination, for a logger made with
 * pino's default line format (createLogging: numeric `level`, epoch `time`, `base` and the
 * logger's bindings, `msg` last). The request line is the one line every request writes at the default level; through
 * pino's generic object walk it cost about 1.3 µs, as a template about 0.3 (measured, pino 9,
 * issue 11). test/http/request-log-redaction.test.ts checks that both writers give the same line.
 */
export function directRequestLines(
  logger: Pick<Logger, 'bindings' | 'isLevelEnabled' | 'levels'>,
  base: Record<string, unknown>,
  write: (line: string) => void,
): RequestLines {
  const info = logger.levels.values.info;
  // pino's bindings() leaves out pid and hostname, which its lines carry from `base`.
  const bindings = Object.entries({ ...base, ...logger.bindings() })
    .map(([key, value]) => `,${JSON.stringify(key)}:${JSON.stringify(value)}`)
    .join('');
  const head = (request: LoggedRequest & { id: string }) => {
    const req = loggedRequest(request);
    return (
      `{"level":${info},"time":${Date.now()}${bindings},"trackingId":${jsonString(request.id)},"req":{"method":${jsonString(req.method)},"url":${jsonString(req.url)}` +
      `${req.host === undefined ? '' : `,"host":${jsonString(req.host)}`}${req.remoteAddress === undefined ? '' : `,"remoteAddress":${jsonString(req.remoteAddress)}`}` +
      `${req.remotePort === undefined ? '' : `,"remotePort":${req.remotePort}`}}`
    );
  };
  return {
    enabled: () => logger.isLevelEnabled('info'),
    completed: (request, statusCode, responseTime) => write(`${head(request)},"res":{"statusCode":${statusCode}},"responseTime":${responseTime},"msg":"${COMPLETED}"}\n`),
    upgrade: (request) => write(`${head(request)},"msg":"${UPGRADE}"}\n`),
  };
}

/**
 * One info line per request, written when its answer has been sent: `request completed` with the
 * trackingId, the request (URL redacted by loggedRequest), the status and the time taken.
 * Fastify's own request logging writes two lines per request through a child logger; at the
 * default level that cost about 20 µs a request on POST /send (bench: 36,700 req/s at warn,
 * 21,300 at info). A websocket upgrade, which never completes as an HTTP answer, is logged when
 * it arrives.
 */
export function installRequestLog(app: App, lines: RequestLines): void {
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.headers.upgrade !== undefined && lines.enabled()) lines.upgrade(request);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    if (lines.enabled()) lines.completed(request, reply.statusCode, Math.round(reply.elapsedTime * 100) / 100);
    done();
  });
}

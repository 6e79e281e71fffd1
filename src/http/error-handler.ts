import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import { distance } from 'fastest-levenshtein';
import type { FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Ids } from '../clock.js';
import { AppError, type ErrorCode, errorBody } from '../errors.js';
import { notServedFix } from './hosted-only.js';
import { nulInUrl } from './json-body.js';
import type { App } from './types.js';

/**
 * The longest path segment the router matches, in characters. Far above any id's own limit
 * (user ids: 256, URL-encoded up to 768) so that the routes' validation answers instead: GET
 * /logs/{trackingIds} must answer 400 TOO_MANY_TRACKING_IDS (the spec gives it no 414), and 30
 * UUIDs already passed the former 1,024. 8,192 holds some 200 comma-separated UUIDs; Node's own
 * limit on the request line and headers is 16 KB.
 */
export const MAX_PATH_SEGMENT_LENGTH = 8192;

/** Fastify's own error codes mapped into our closed list. */
const FASTIFY_CODES: Record<string, { code: ErrorCode; message?: string; fix?: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'PAYLOAD_TOO_LARGE', message: 'The request body is larger than this server accepts.', fix: 'Send a smaller body, or raise CLARION_BODY_LIMIT on the server.' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Unsupported Content-Type.', fix: 'Send JSON with Content-Type: application/json.' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'INVALID_JSON', message: 'The body is empty but Content-Type is application/json.', fix: 'Send a JSON body or omit the Content-Type header.' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'VALIDATION_FAILED', message: 'Content-Length does not match the body.' },
  FST_ERR_BAD_URL: { code: 'VALIDATION_FAILED', message: 'The URL has a malformed percent-escape.', fix: 'Percent-encode the path as UTF-8 (encodeURIComponent).' },
  FST_ERR_MAX_PARAM_LENGTH: { code: 'URI_TOO_LONG', message: `A path segment is longer than this server accepts (${MAX_PATH_SEGMENT_LENGTH} characters).`, fix: 'Use a shorter id.' },
};

// Not OPTIONS: the CORS plugin (http/cors.ts) serves it on every path, for preflights.
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'] as const;

/** Ajv says "must NOT have additional properties" without saying which: name it. */
function unexpectedProperty(validation: FastifyError['validation']): string {
  const name = (validation?.[0]?.params as { additionalProperty?: unknown } | undefined)?.additionalProperty;
  return typeof name === 'string' ? `: "${name}" is not allowed` : '';
}

/**
 * Ajv checks `required` before unknown properties and stops at the first error, so a misspelt
 * key ({"email": {"subjec": ...}}) is reported as the key it should have been: name the near
 * miss (at most 2 edits away, by fastest-levenshtein) from the body the error points into.
 */
function misspeltRequired(validation: FastifyError['validation'], context: string | undefined, request: FastifyRequest): string {
  const first = validation?.[0];
  const missing = (first?.params as { missingProperty?: unknown } | undefined)?.missingProperty;
  if (first?.keyword !== 'required' || typeof missing !== 'string' || context !== 'body') return '';
  let target: unknown = request.body;
  for (const step of first.instancePath.split('/').slice(1)) {
    target = target !== null && typeof target === 'object' ? (target as Record<string, unknown>)[step.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  }
  if (target === null || typeof target !== 'object' || Array.isArray(target)) return '';
  const near = Object.keys(target).find((key) => key !== missing && distance(key.toLowerCase(), missing.toLowerCase()) <= 2);
  return near === undefined ? '' : ` (is "${near}" a misspelling of "${missing}"?)`;
}

export function installErrorHandling(app: App): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      return reply.status(err.status).send(errorBody(request.id, err.code, err.message, err.fix));
    }
    if (err.validation) {
      const where = err.validationContext ?? 'request';
      return reply
        .status(400)
        .send(
          errorBody(
            request.id,
            'VALIDATION_FAILED',
            `Invalid ${where}: ${err.message}${unexpectedProperty(err.validation)}${misspeltRequired(err.validation, err.validationContext, request)}`,
            'See /openapi.json for the expected shape.',
          ),
        );
    }
    if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      return reply.status(400).send(errorBody(request.id, 'INVALID_JSON', 'The request body is not valid JSON.', 'Send a well-formed JSON document.'));
    }
    const mapped = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (mapped) {
      return reply.status(statusOf(mapped.code)).send(errorBody(request.id, mapped.code, mapped.message ?? err.message, mapped.fix));
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      // Other client errors raised by Fastify or a plugin (e.g. malformed URL encoding).
      return reply.status(400).send(errorBody(request.id, 'VALIDATION_FAILED', err.message));
    }
    // Anything else is our fault: log it whole, reveal nothing internal.
    request.log.error({ err }, 'unhandled error');
    return reply
      .status(500)
      .send(errorBody(request.id, 'INTERNAL_ERROR', 'An internal error occurred.', `Retry later; quote trackingId ${request.id} when reporting it.`));
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    // Only on a miss: is the path served under other methods?
    const allowed = METHODS.filter((method) => method !== request.method && app.findRoute({ method, url: path }));
    if (allowed.length) {
      return reply
        .status(405)
        .header('allow', allowed.join(', '))
        .send(errorBody(request.id, 'METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${path}.`, `Use ${allowed.join(', ')}.`));
    }
    return reply.status(404).send(errorBody(request.id, 'ROUTE_NOT_FOUND', `No route ${request.method} ${path}.`, notServedFix(path) ?? 'See /openapi.json for the available routes.'));
  });

  // Fastify's own 503 while closing has no Error body (return503OnClosing is off in app.ts).
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    // Node's server.close() closes only the keep-alive connections idle at that moment: one whose
    // request is under way goes idle later and would hold app.close() for the keep-alive timeout
    // (Fastify's 72 s) while its client keeps it. Node reads the timeout as each answer ends, so
    // from now on such a connection closes as soon as it is idle. (An onSend hook answering
    // `Connection: close` cost every request of the hot path a hook run: bench send, stop 41.)
    app.server.keepAliveTimeout = 1;
    done();
  });

  // Checks on the request line and headers that hold for every route, before routing's own work.
  app.addHook('onRequest', (request, reply, done) => {
    if (closing) {
      void reply.header('connection', 'close');
      return done(new AppError('SERVICE_UNAVAILABLE', 'The server is shutting down.', 'Retry: another instance, or this one once restarted, will answer.'));
    }
    // Node's parser is told not to require Host (it would answer an empty 400): it is required here.
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      return done(new AppError('VALIDATION_FAILED', 'An HTTP/1.1 request needs a Host header.', 'Send the Host header.'));
    }
    const nul = nulInUrl(request.url);
    if (nul) return done(new AppError('VALIDATION_FAILED', `The ${nul} has a NUL character (%00).`, 'Remove the NUL characters; ids and text cannot hold them.'));
    done();
  });
}

/** Fastify's own answers before routing (a malformed escape, a path segment over maxParamLength). */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const mapped = FASTIFY_CODES[err.code] ?? { code: 'VALIDATION_FAILED' as const, message: err.message };
  void reply.status(statusOf(mapped.code)).send(errorBody(request.id, mapped.code, mapped.message ?? err.message, mapped.fix));
}

/**
 * Errors of Node's HTTP parser (headers too large, a bad request line or chunk, a timeout): no
 * request exists, so the answer is written on the socket; it still carries the Error body, with
 * a trackingId from `ids` (the app's id source).
 */
export function clientErrorHandler(ids: Ids): (this: { log: FastifyBaseLogger } | undefined, err: NodeJS.ErrnoException, socket: Socket) => void {
  return function handleClientError(err, socket) {
    answerClientError.call(this, ids.uuid(), err, socket);
  };
}

function answerClientError(this: { log: FastifyBaseLogger } | undefined, trackingId: string, err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [code, message, fix]: [ErrorCode, string, string | undefined] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['REQUEST_TIMEOUT', 'The request was not received in time.', 'Send the whole request promptly.']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? ['HEADERS_TOO_LARGE', 'The request headers are larger than this server accepts.', 'Send smaller headers (cookies, tokens).']
        : ['VALIDATION_FAILED', `The request is not valid HTTP/1.1 (${err.code ?? 'parse error'}).`, undefined];
  const status = statusOf(code);
  // Fastify binds this handler to the instance: log the trackingId the client is given, as every
  // routed request's log line carries its own (one line per refused connection, no body).
  this?.log.info({ trackingId, code: err.code, status }, 'client error before routing');
  const body = JSON.stringify(errorBody(trackingId, code, message, fix));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

function statusOf(code: ErrorCode): number {
  return new AppError(code, '').status;
}

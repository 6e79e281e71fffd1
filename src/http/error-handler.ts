import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, type ErrorCode, errorBody } from '../errors.js';
import type { App } from './types.js';

/** Fastify's own error codes mapped into our closed list. */
const FASTIFY_CODES: Record<string, { code: ErrorCode; message?: string; fix?: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'PAYLOAD_TOO_LARGE', message: 'The request body is larger than this server accepts.', fix: 'Send a smaller body, or raise CLARION_BODY_LIMIT on the server.' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'Unsupported Content-Type.', fix: 'Send JSON with Content-Type: application/json.' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'INVALID_JSON', message: 'The body is empty but Content-Type is application/json.', fix: 'Send a JSON body or omit the Content-Type header.' },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'VALIDATION_FAILED', message: 'Content-Length does not match the body.' },
};

export function installErrorHandling(app: App): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof AppError) {
      return reply.status(err.status).send(errorBody(request.id, err.code, err.message, err.fix));
    }
    if (err.validation) {
      const where = err.validationContext ?? 'request';
      return reply
        .status(400)
        .send(errorBody(request.id, 'VALIDATION_FAILED', `Invalid ${where}: ${err.message}`, 'See /openapi.json for the expected shape.'));
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
    reply
      .status(404)
      .send(errorBody(request.id, 'ROUTE_NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0]}.`, 'See /openapi.json for the available routes.'));
  });
}

function statusOf(code: ErrorCode): number {
  return new AppError(code, '').status;
}

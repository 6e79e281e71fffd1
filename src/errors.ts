/**
 * The closed list of machine-readable error codes (README: Errors). Every non-2xx body is
 * `{trackingId, error: {code, message, fix}}` and its status comes from this table only.
 */
export const ERROR_STATUS = {
  VALIDATION_FAILED: 400,
  INVALID_JSON: 400,
  ENVIRONMENT_REQUIRED: 400,
  PROPERTY_LIMIT_EXCEEDED: 400,
  TOO_MANY_TRACKING_IDS: 400,
  UNVERIFIED_DOMAIN: 400,
  UNAUTHORIZED: 401,
  USAGE_LIMIT_EXCEEDED: 402,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  CONFLICT: 409,
  IDEMPOTENCY_CONFLICT: 409,
  ATTACHMENT_TOO_LARGE: 413,
  PAYLOAD_TOO_LARGE: 413,
  URI_TOO_LONG: 414,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  HEADERS_TOO_LARGE: 431,
  INTERNAL_ERROR: 500,
  PROVIDER_ERROR: 502,
  SERVICE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly fix?: string;
  constructor(code: ErrorCode, message: string, fix?: string) {
    // A client error is answered with its body and never logged with a stack, so none is captured:
    // capturing one was about a seventh of the CPU of a 429 (a flood past a rate limit).
    const depth = Error.stackTraceLimit;
    if (ERROR_STATUS[code] < 500) Error.stackTraceLimit = 0;
    try {
      super(message);
    } finally {
      Error.stackTraceLimit = depth;
    }
    this.code = code;
    this.fix = fix;
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what: string, id: string, fix?: string) =>
  new AppError('NOT_FOUND', `${what} "${id}" was not found in this environment.`, fix);

export const invalid = (message: string, fix?: string) => new AppError('VALIDATION_FAILED', message, fix);

export interface ErrorBody {
  trackingId: string;
  error: { code: ErrorCode; message: string; fix: string };
}

/**
 * What to do about each code when the place that refused knows nothing more specific: every
 * error body carries a `fix`, as the bar for this API asks, not only those whose refusal wrote one.
 */
const GENERIC_FIX: Record<ErrorCode, string> = {
  VALIDATION_FAILED: 'Correct what the message names; every operation and its schema is in /openapi.json.',
  INVALID_JSON: 'Send a valid JSON body with content-type: application/json.',
  ENVIRONMENT_REQUIRED: 'With an account token, name the environment: ?envId=<clientId>.',
  PROPERTY_LIMIT_EXCEEDED: 'Keep user properties within 25 keys, 64-character keys, 256-character values and 1 KB in all.',
  TOO_MANY_TRACKING_IDS: 'Ask for at most 25 tracking ids at a time.',
  UNVERIFIED_DOMAIN: 'Send from the platform default sender or from an address on a verified domain (GET /domains).',
  UNAUTHORIZED: 'Send Authorization: Bearer <API key or account token>, or Basic <clientId:clientSecret>.',
  USAGE_LIMIT_EXCEEDED: "Raise the account's messagesCap (PATCH /account) or wait for the next billing cycle.",
  FORBIDDEN: 'Use credentials that may do this (README: Permission matrix).',
  NOT_FOUND: 'Check the id, and that your credentials are for the environment that holds it.',
  ROUTE_NOT_FOUND: 'See /openapi.json for the available routes.',
  METHOD_NOT_ALLOWED: 'Use one of the methods in the Allow header.',
  REQUEST_TIMEOUT: 'Send the whole request promptly.',
  CONFLICT: "Read the record's current state and ask for what it allows.",
  IDEMPOTENCY_CONFLICT: 'Use a new Idempotency-Key for a different request.',
  ATTACHMENT_TOO_LARGE: 'Keep inline attachments under about 4 MB, or link to the file.',
  PAYLOAD_TOO_LARGE: 'Send a smaller body (the server accepts up to CLARION_BODY_LIMIT).',
  URI_TOO_LONG: 'Use shorter path segments.',
  UNSUPPORTED_MEDIA_TYPE: 'Send a JSON body with content-type: application/json.',
  RATE_LIMITED: 'Retry after the number of seconds in Retry-After.',
  HEADERS_TOO_LARGE: 'Send smaller headers (cookies, tokens).',
  INTERNAL_ERROR: 'Retry later; quote the trackingId when reporting it.',
  PROVIDER_ERROR: 'Retry later: the delivery provider failed.',
  SERVICE_UNAVAILABLE: 'Retry later: storage is unreachable (GET /status).',
};

export function errorBody(trackingId: string, code: ErrorCode, message: string, fix?: string): ErrorBody {
  return { trackingId, error: { code, message, fix: fix || GENERIC_FIX[code] } };
}

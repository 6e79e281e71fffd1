/**
 * The closed list of machine-readable error codes (README: Errors). Every non-2xx body is
 * `{trackingId, error: {code, message, fix?}}` and its status comes from this table only.
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
  error: { code: ErrorCode; message: string; fix?: string };
}

export function errorBody(trackingId: string, code: ErrorCode, message: string, fix?: string): ErrorBody {
  return { trackingId, error: fix ? { code, message, fix } : { code, message } };
}

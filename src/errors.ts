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
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly fix?: string,
  ) {
    super(message);
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

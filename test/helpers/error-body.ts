import { expect } from 'vitest';

/** The spec's Error body of a failed request, as a test reads it back. */
export interface ErrorBodyOf {
  trackingId: string;
  error: { code: string; message: string; fix?: string };
}

/** Asserts a response is the Error body with this status, code and message; answers the body. */
export function expectErrorBody(res: { statusCode: number; json(): unknown }, status: number, code: string, message: RegExp): ErrorBodyOf {
  expect(res.statusCode).toBe(status);
  const body = res.json() as ErrorBodyOf;
  expect(typeof body.trackingId).toBe('string');
  expect(body.trackingId.length).toBeGreaterThan(0);
  expect(body.error.code).toBe(code);
  expect(body.error.message).toMatch(message);
  return body;
}

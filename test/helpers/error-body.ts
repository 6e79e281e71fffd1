import { expect } from 'vitest';

/** The spec's Error body of a failed request, as a test reads it back. */
export interface ErrorBodyOf {
  trackingId: string;
  error: { code: string; message: string; fix: string };
}

/** Asserts a response is the Error body with this status, code and message; answers the body. */
export function expectErrorBody(res: { statusCode: number; json(): unknown }, status: number, code: string, message: RegExp): ErrorBodyOf {
  expect(res.statusCode).toBe(status);
  const body = res.json() as ErrorBodyOf;
  expect(typeof body.trackingId).toBe('string');
  expect(body.trackingId.length).toBeGreaterThan(0);
  expect(body.error.code).toBe(code);
  expect(body.error.message).toMatch(message);
  expect(typeof body.error.fix, 'every error body says what to do').toBe('string');
  expect(body.error.fix.length).toBeGreaterThan(0);
  return body;
}

/**
 * The status and Error body of an SDK call that must fail (the generated clients throw a
 * ResponseError holding the fetch Response); fails the test when the call succeeds.
 */
export async function sdkRefusal(call: Promise<unknown>): Promise<{ status: number; body: ErrorBodyOf }> {
  const err = await call.then(
    () => expect.fail('the call succeeded'),
    (e: unknown) => e as Error & { response?: Response },
  );
  if (!err.response) throw err;
  return { status: err.response.status, body: (await err.response.json()) as ErrorBodyOf };
}

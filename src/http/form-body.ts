import { type FormParams, parseForm } from '../channels/telephony/signature.js';
import type { App } from './types.js';

const FORM = 'application/x-www-form-urlencoded';

/**
 * Reads form bodies in `scope` (an encapsulated plugin scope): carrier-facing routes (Twilio
 * protocol) take them. The parser lives in that scope only, so it neither changes how the rest
 * of the API reads bodies nor clashes with other modules.
 */
export function acceptFormBodies(scope: App): void {
  if (scope.hasContentTypeParser(FORM)) scope.removeContentTypeParser(FORM);
  scope.addContentTypeParser(FORM, { parseAs: 'string' }, (_req, body, done) => done(null, parseForm(String(body))));
}

export const formOf = (body: unknown): FormParams => (body && typeof body === 'object' && !Array.isArray(body) ? (body as FormParams) : {});

import { AjvCompiler, type ValidatorFactory } from '@fastify/ajv-compiler';

/**
 * Fastify's validator compiler (@fastify/ajv-compiler, the one it uses by default) with the types
 * of JSON bodies taken as sent. Path and query parameters are text and must be coerced ("5" to
 * 5, `?a=x` to ["x"]); a JSON body has its own types, and coercing them changed what a client
 * said: `{"secureMode": null}` turned secure mode off, `"title": ["a"]` stored "a", a subject of
 * null was stored as "". A body whose value has the wrong type is refused with 400 instead.
 */
export function buildValidator(): ValidatorFactory {
  const fromPool = AjvCompiler();
  return (externalSchemas, options) => {
    const coercing = fromPool(externalSchemas, options);
    const asSent = fromPool(externalSchemas, { ...options, customOptions: { ...options?.customOptions, coerceTypes: false } } as typeof options);
    return (route) => (route.httpPart === 'body' ? asSent : coercing)(route);
  };
}

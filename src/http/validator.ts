import { AjvCompiler, type ValidatorFactory } from '@fastify/ajv-compiler';

type Validate = ((data: unknown) => unknown) & { errors?: unknown[] | null };

/**
 * Fastify's validator compiler (@fastify/ajv-compiler, the one it uses by default) with the types
 * of JSON bodies taken as sent. Path and query parameters are text and must be coerced ("5" to
 * 5, `?a=x` to ["x"]); a JSON body has its own types, and coercing them changed what a client
 * said: `{"secureMode": null}` turned secure mode off, `"title": ["a"]` stored "a", a subject of
 * null was stored as "". A body whose value has the wrong type is refused with 400 instead.
 * Coercion reads "1e309" and "Infinity" as Infinity, which Ajv's integer and maximum checks let
 * through (every `?limit=` reached SQL as Infinity: a 500); a parameter coerced to a number that
 * is not finite is refused as Ajv refuses a wrong type.
 */
export function buildValidator(): ValidatorFactory {
  const fromPool = AjvCompiler();
  return (externalSchemas, options) => {
    const coercing = fromPool(externalSchemas, options);
    const asSent = fromPool(externalSchemas, { ...options, customOptions: { ...options?.customOptions, coerceTypes: false } } as typeof options);
    return (route) => (route.httpPart === 'body' ? asSent(route) : (finiteNumbersOnly(coercing(route) as Validate) as unknown as ReturnType<typeof coercing>));
  };
}

function finiteNumbersOnly(validate: Validate): Validate {
  const checked: Validate = (data) => {
    const valid = validate(data);
    checked.errors = validate.errors;
    if (valid !== true || data === null || typeof data !== 'object') return valid;
    for (const [name, value] of Object.entries(data)) {
      const values: unknown[] = Array.isArray(value) ? value : [value];
      if (values.some((v) => typeof v === 'number' && !Number.isFinite(v))) {
        checked.errors = [{ instancePath: `/${name}`, schemaPath: '#/type', keyword: 'type', params: { type: 'number' }, message: 'must be a finite number' }];
        return false;
      }
    }
    return valid;
  };
  return checked;
}

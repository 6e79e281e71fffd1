import { STATUS_CODES } from 'node:http';
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import type { FastifySwaggerUiOptions } from '@fastify/swagger-ui';
import type { Config } from '../config.js';
import { operationIdOf } from './operation-ids.js';

/**
 * The options of @fastify/swagger: the OpenAPI document served at /openapi.json and rendered at
 * /docs, built from the routes' schemas. Everything the routes do not say themselves is added
 * here, once: servers, security schemes, component names, operationIds, response descriptions.
 * `npm run lint` checks the result with redocly (redocly.yaml, scripts/lint-openapi.mjs).
 */
export function openApiOptions(config: Pick<Config, 'publicUrl'>): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Clarion',
        version: '0.1.0',
        description: 'Self-hostable notification service',
        license: { name: 'MIT', url: 'https://opensource.org/license/mit' },
      },
      // Without a public URL the document's own origin: "Try it out" on /docs calls this server.
      servers: [config.publicUrl ? { url: config.publicUrl, description: 'CLARION_PUBLIC_URL' } : { url: '/', description: 'this server' }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'API key (clarion_sk_...) or account JWT' },
          basic: { type: 'http', scheme: 'basic', description: 'environment clientId:clientSecret' },
          inappUser: { type: 'http', scheme: 'basic', description: 'in-app clients: clientId:userId:userHash (hash needed in secure mode)' },
        },
      },
      security: [{ bearer: [] }, { basic: [] }],
    },
    // Shared schemas are named by their $id (ErrorBody, SendBody, User...) rather than def-0, def-1...
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transform: ({ schema, url, route }) => {
      const method = Array.isArray(route.method) ? String(route.method[0]) : route.method;
      return { url, schema: { operationId: operationIdOf(method, url), ...schema } };
    },
    transformObject: (document) => forOpenApi30('openapiObject' in document ? document.openapiObject : document.swaggerObject),
  };
}

/** /docs: Swagger UI, its assets served from the package (nothing loads from elsewhere). */
export const docsOptions: FastifySwaggerUiOptions = {
  routePrefix: '/docs',
  // validatorUrl stays at its default (off): no online validator badge, no request elsewhere.
  theme: { title: 'Clarion API' },
  // BaseLayout: no top bar (the package's logo and a box to load any other document's URL).
  // docExpansion 'none': the page opens on the list of tags, each opening on its operations.
  // Swagger UI 5 renders 'list' (every operation at once) in seconds up to 127 operations and
  // stalls past it (measured in headless Chromium: 127 render, 128 stop after the first few).
  uiConfig: { layout: 'BaseLayout', docExpansion: 'none', deepLinking: true, displayOperationId: true },
  // The package's Content-Security-Policy (its own scripts and styles by hash), framed by no other
  // site, and without upgrade-insecure-requests, which on a plain-http server (the default,
  // http://127.0.0.1:3000) would send the page's own requests to an https port nobody serves.
  staticCSP: true,
  transformStaticCSP: (header) => header.replace(/\s*upgrade-insecure-requests;?/, '').replace("frame-ancestors 'self'", "frame-ancestors 'none'"),
  uiHooks: {
    onRequest: (_request, reply, done) => {
      reply.header('x-content-type-options', 'nosniff').header('x-frame-options', 'DENY');
      done();
    },
  },
};

/**
 * The generated document, as a copy (the route schemas stay as Ajv compiled them) adjusted to
 * OpenAPI 3.0: TypeBox writes JSON Schema draft 7's numeric `exclusiveMinimum`/`exclusiveMaximum`,
 * which 3.0 spells as a bound plus a boolean; responses the routes did not describe get their
 * status text instead of "Default Response".
 */
function forOpenApi30<T>(document: T): T {
  const copy = JSON.parse(JSON.stringify(document)) as T;
  visit(copy, (node) => {
    for (const [exclusive, bound] of [['exclusiveMinimum', 'minimum'], ['exclusiveMaximum', 'maximum']] as const) {
      if (typeof node[exclusive] === 'number') {
        node[bound] = node[exclusive];
        node[exclusive] = true;
      }
    }
  });
  const paths = (copy as { paths?: Record<string, Record<string, { responses?: Record<string, { description?: string }> }>> }).paths ?? {};
  for (const operation of Object.values(paths).flatMap((item) => Object.values(item))) {
    for (const [status, response] of Object.entries(operation.responses ?? {})) {
      if (response.description === 'Default Response') response.description = STATUS_CODES[status] ?? 'Response';
    }
  }
  return copy;
}

function visit(node: unknown, each: (node: Record<string, unknown>) => void): void {
  if (Array.isArray(node)) for (const item of node) visit(item, each);
  else if (node !== null && typeof node === 'object') {
    each(node as Record<string, unknown>);
    for (const value of Object.values(node)) visit(value, each);
  }
}

import { Type } from '@sinclair/typebox';
import type { Registry } from 'prom-client';
import type { Deps } from '../../deps.js';
import { errorBody } from '../../errors.js';
import type { App } from '../../http/types.js';

export function systemRoutes(app: App, deps: Deps, metrics: Registry): void {
  const config = { auth: 'none' as const };

  app.get(
    '/status',
    {
      config,
      schema: {
        tags: ['health'],
        summary: 'Health, with a storage round trip',
        // 400: a request Fastify refuses before any handler (an HTTP/1.1 request without Host).
        response: { 200: Type.Object({ message: Type.String(), storage: Type.String() }), 400: Type.Ref('ErrorBody'), 503: Type.Ref('ErrorBody') },
      },
    },
    async (req, reply) => {
      try {
        await deps.storage.ping();
        return { message: 'OK', storage: deps.storage.dialect };
      } catch (err) {
        req.log.error({ err }, 'storage health check failed');
        return reply.status(503).send(errorBody(req.id, 'SERVICE_UNAVAILABLE', 'Storage is not reachable.', 'Check the database server and DATABASE_URL.'));
      }
    },
  );

  app.get('/metrics', { config, schema: { hide: true } }, (_req, reply) => {
    reply.header('content-type', metrics.contentType);
    return metrics.metrics();
  });

  app.get('/openapi.json', { config, schema: { hide: true } }, () => app.swagger());
}

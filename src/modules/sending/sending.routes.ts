import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { requireEnv } from '../auth/auth.service.js';
import { SendBodySchema, SendResponseSchema } from './sending.schemas.js';
import type { SendContext, SendingService } from './sending.service.js';

function context(req: FastifyRequest): SendContext {
  const key = req.headers['idempotency-key'];
  if (Array.isArray(key) || (key !== undefined && (key.length === 0 || key.length > 255))) {
    throw new AppError('VALIDATION_FAILED', 'Idempotency-Key must be one value of 1 to 255 characters.');
  }
  return {
    accountId: req.auth.accountId,
    envId: requireEnv(req.auth),
    idempotencyKey: key,
    ip: req.ip,
    agent: req.headers['user-agent'],
  };
}

export function sendingRoutes(app: App, service: SendingService): void {
  app.addSchema(SendBodySchema);
  const tags = ['sending'];
  const sendSchema = {
    tags,
    summary: 'Send a notification to one user (answered once it is durably queued)',
    body: Type.Ref('SendBody'),
    response: withErrors({ 202: SendResponseSchema, 409: Type.Ref('ErrorBody'), 413: Type.Ref('ErrorBody') }),
  };

  app.post('/send', { schema: sendSchema }, async (req, reply) => {
    reply.status(202);
    return service.accept(context(req), req.body as never);
  });

  // The older clients' path, authenticated with the environment's Basic credentials; the path's
  // clientId selects the environment as ?envId= does (src/http/auth.ts).
  app.post('/:clientId/sender', { schema: { ...sendSchema, params: Type.Object({ clientId: Type.String() }) } }, async (req, reply) => {
    reply.status(202);
    return service.accept(context(req), req.body as never);
  });

  app.put(
    '/sender/scheduler/:trackingId',
    {
      schema: {
        tags,
        summary: 'Change the body or time of a scheduled send',
        params: Type.Object({ trackingId: Type.String() }),
        body: Type.Ref('SendBody'),
        response: withErrors({ 200: MessageSchema, 409: Type.Ref('ErrorBody') }),
      },
    },
    async (req) => {
      await service.updateSchedule(context(req), req.params.trackingId, req.body as never);
      return { message: 'schedule updated' };
    },
  );

  app.delete(
    '/sender/scheduler/:trackingId',
    {
      schema: {
        tags,
        summary: 'Cancel a scheduled send',
        params: Type.Object({ trackingId: Type.String() }),
        response: withErrors({ 200: MessageSchema, 409: Type.Ref('ErrorBody') }),
      },
    },
    async (req) => {
      await service.cancelSchedule(context(req), req.params.trackingId);
      return { message: 'scheduled send canceled' };
    },
  );
}

import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { requireEnv } from '../auth/auth.service.js';
import { SendBodySchema, SendResponseSchema } from './sending.schemas.js';
import type { SendContext, SendingService } from './sending.service.js';
import { directSendRoutes } from './direct-sends.routes.js';

export function context(req: FastifyRequest): SendContext {
  const key = req.headers['idempotency-key'];
  if (Array.isArray(key) || (key !== undefined && (key.length === 0 || key.length > 255 || repeatedHeader(req.raw.rawHeaders, 'idempotency-key')))) {
    throw new AppError('VALIDATION_FAILED', 'Idempotency-Key must be one value of 1 to 255 characters.', 'Send the header once, with one key per distinct request.');
  }
  return {
    accountId: req.auth.accountId,
    envId: requireEnv(req.auth),
    idempotencyKey: key,
    ip: req.ip,
    agent: req.headers['user-agent'],
  };
}

/** Whether `name` (lower case) is sent more than once: Node joins repeated headers it does not know into one value ("a, b"). */
function repeatedHeader(rawHeaders: string[], name: string): boolean {
  let seen = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].length === name.length && rawHeaders[i].toLowerCase() === name && ++seen > 1) return true;
  return false;
}

const ClientParams = Type.Object({ clientId: Type.String() });

export function sendingRoutes(app: App, service: SendingService): void {
  app.addSchema(SendBodySchema);
  const tags = ['sending'];
  const sendSchema = {
    tags,
    summary: 'Send a notification to one user (answered once it is durably queued)',
    body: Type.Ref('SendBody'),
    response: withErrors({ 202: SendResponseSchema, 409: Type.Ref('ErrorBody'), 413: Type.Ref('ErrorBody') }),
  };

  // 200 as the interface's default; 202 only when `messages` carries warnings (what clients show as one).
  const sendResponses = withErrors({ 200: SendResponseSchema, 202: SendResponseSchema, 409: Type.Ref('ErrorBody'), 413: Type.Ref('ErrorBody') });
  const acceptSend = async (req: FastifyRequest, reply: FastifyReply) => {
    const accepted = await service.accept(context(req), req.body as never);
    reply.status(accepted.messages.length > 0 ? 202 : 200);
    return accepted;
  };
  // The scheduler's two paths (PUT /sender/scheduler/..., the older SDK's /{clientId}/schedule/...) do the same.
  const trackingIdOf = (req: FastifyRequest) => (req.params as { trackingId: string }).trackingId;
  const updateScheduled = async (req: FastifyRequest) => {
    await service.updateSchedule(context(req), trackingIdOf(req), req.body as never);
    return { message: 'schedule updated' };
  };
  const cancelScheduled = async (req: FastifyRequest) => {
    await service.cancelSchedule(context(req), trackingIdOf(req));
    return { message: 'scheduled send canceled' };
  };
  app.post('/send', { schema: { ...sendSchema, response: sendResponses } }, acceptSend);

  directSendRoutes(app, service, context);

  // The older clients' path, authenticated with the environment's Basic credentials; the path's
  // clientId selects the environment as ?envId= does (src/http/auth.ts). The older server SDK
  // logs every 202 as "NotificationAPI warning.", so 202 is kept for sends that carry warnings.
  app.post(
    '/:clientId/sender',
    {
      schema: {
        ...sendSchema,
        summary: 'Send a notification to one user (older server SDK): 200, or 202 when `messages` carries warnings',
        params: ClientParams,
        response: sendResponses,
      },
    },
    acceptSend,
  );

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
    updateScheduled,
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
    cancelScheduled,
  );

  // The older server SDK's updateSchedule and deleteSchedule: a partial send body merged into
  // the scheduled one (as PUT /sender/scheduler/{trackingId}), or the cancelation.
  const ScheduleParams = Type.Object({ clientId: Type.String(), trackingId: Type.String() });
  app.patch(
    '/:clientId/schedule/:trackingId',
    {
      schema: {
        tags,
        summary: 'Change the body or time of a scheduled send (older server SDK)',
        params: ScheduleParams,
        body: Type.Ref('SendBody'),
        response: withErrors({ 200: MessageSchema, 409: Type.Ref('ErrorBody') }),
      },
    },
    updateScheduled,
  );

  app.delete(
    '/:clientId/schedule/:trackingId',
    { schema: { tags, summary: 'Cancel a scheduled send (older server SDK)', params: ScheduleParams, response: withErrors({ 200: MessageSchema, 409: Type.Ref('ErrorBody') }) } },
    cancelScheduled,
  );
}

import { Type } from '@sinclair/typebox';
import { EmptyBody, IsoDateTime, MessageSchema, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../auth/auth.service.js';
import { EVENT_TYPES } from './events.js';
import type { EndpointView, WebhooksService } from './webhooks.service.js';

const events = Type.Array(Type.String({ maxLength: 64 }), {
  maxItems: 100,
  description: `event names: ${EVENT_TYPES.join(', ')}; any other value is refused (400) by name`,
});
const EndpointBody = Type.Object(
  {
    webhook: Type.String({ maxLength: 4096, description: 'destination http(s) URL' }),
    events,
  },
  { additionalProperties: false },
);
const EndpointSchema = Type.Object({
  id: Type.String(),
  webhook: Type.String(),
  events: Type.Array(Type.String()),
  secret: Type.String({ description: 'whsec_ + base64 of 24 random bytes: the HMAC secret that signs deliveries' }),
  disabled: Type.Optional(Type.Boolean()),
  disabledAt: Type.Optional(Type.String()),
  disabledReason: Type.Optional(Type.String({ description: 'why deliveries stopped (410 Gone, or 5 days of failures); PUT enables it again' })),
  failingSince: Type.Optional(Type.String({ description: 'first failed attempt since the last success' })),
});
const EventsWebhookSchema = Type.Object({
  webhookId: Type.String(),
  webhook: Type.String(),
  events: Type.Array(Type.String()),
  secret: Type.String(),
});
const AttemptSchema = Type.Object({
  id: Type.String(),
  eventId: Type.String(),
  eventType: Type.String(),
  attempt: Type.Integer(),
  at: Type.String(),
  success: Type.Boolean(),
  statusCode: Type.Union([Type.Integer(), Type.Null()]),
  durationMs: Type.Integer(),
  response: Type.Union([Type.String(), Type.Null()], { description: 'first 4 KB of the response body' }),
  error: Type.Union([Type.String(), Type.Null()]),
  nextAttemptAt: Type.Union([Type.String(), Type.Null()]),
  trigger: Type.String({ description: 'event (the first attempt), retry (a scheduled one), replay (the first attempt after a replay or a recovery)' }),
});
const EndpointParams = Type.Object({ endpointId: Type.String({ minLength: 1, maxLength: 64 }) });

const sdkView = (e: EndpointView) => ({ webhookId: e.id, webhook: e.webhook, events: e.events, secret: e.secret });

/** Webhook endpoints (docs/webhooks.md): the spec's multi-endpoint form and the pingram SDK's /webhooks/events. */
export function webhookRoutes(app: App, service: WebhooksService): void {
  const tags = ['webhooks'];
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  app.post(
    '/webhooks',
    { schema: { tags, summary: 'Create a webhook endpoint; the answer carries its signing secret', body: EndpointBody, response: withErrors({ 200: EndpointSchema }) } },
    (req) => service.create(scope(req.auth), req.body),
  );
  app.get(
    '/webhooks',
    { schema: { tags, summary: "This environment's webhook endpoints", response: withErrors({ 200: Type.Object({ webhooks: Type.Array(EndpointSchema) }) }) } },
    async (req) => ({ webhooks: await service.list(scope(req.auth)) }),
  );

  // The pingram SDK's single endpoint (WebhooksApi). Static paths win over /webhooks/:endpointId.
  app.get(
    '/webhooks/events',
    { schema: { tags, summary: "The environment's events webhook (pingram SDK getEventsWebhook)", response: withErrors({ 200: EventsWebhookSchema }) } },
    async (req) => sdkView(await service.getEventsWebhook(scope(req.auth))),
  );
  app.put(
    '/webhooks/events',
    { schema: { tags, summary: 'Create or replace the events webhook (pingram SDK upsertEventsWebhook); its secret is kept', body: EndpointBody, response: withErrors({ 200: EventsWebhookSchema }) } },
    async (req) => sdkView(await service.upsertEventsWebhook(scope(req.auth), req.body)),
  );
  app.delete(
    '/webhooks/events',
    { schema: { tags, summary: 'Remove the events webhook (pingram SDK deleteEventsWebhook); 200, empty body', response: withErrors({ 200: EmptyBody }) } },
    async (req, reply) => {
      await service.deleteEventsWebhook(scope(req.auth));
      return reply.code(200).send();
    },
  );

  app.get(
    '/webhooks/:endpointId',
    { schema: { tags, summary: 'One webhook endpoint', params: EndpointParams, response: withErrors({ 200: EndpointSchema }) } },
    (req) => service.get(scope(req.auth), req.params.endpointId),
  );
  app.put(
    '/webhooks/:endpointId',
    { schema: { tags, summary: 'Update a webhook endpoint; the signing secret is kept, a disabled endpoint is enabled again', params: EndpointParams, body: EndpointBody, response: withErrors({ 200: EndpointSchema }) } },
    (req) => service.update(scope(req.auth), req.params.endpointId, req.body),
  );
  app.delete(
    '/webhooks/:endpointId',
    { schema: { tags, summary: 'Delete a webhook endpoint; 200, empty body (the spec)', params: EndpointParams, response: withErrors({ 200: EmptyBody }) } },
    async (req, reply) => {
      await service.delete(scope(req.auth), req.params.endpointId);
      return reply.code(200).send();
    },
  );
  app.post(
    '/webhooks/:endpointId/secret',
    { schema: { tags, summary: 'Rotate the signing secret; the old one keeps signing (webhook-signature) for 24 h', params: EndpointParams, response: withErrors({ 200: EndpointSchema }) } },
    (req) => service.rotateSecret(scope(req.auth), req.params.endpointId),
  );
  app.get(
    '/webhooks/:endpointId/attempts',
    {
      schema: {
        tags,
        summary: 'Delivery attempts to this endpoint, newest first',
        params: EndpointParams,
        querystring: Type.Object({
          cursor: Type.Optional(Type.String({ maxLength: 64, description: 'nextCursor of the previous page' })),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
          event: Type.Optional(Type.String({ maxLength: 64, description: 'only attempts of this event name' })),
          failed: Type.Optional(Type.Boolean({ description: 'true: failed attempts only; false: successful only' })),
        }),
        response: withErrors({ 200: Type.Object({ attempts: Type.Array(AttemptSchema), nextCursor: Type.Optional(Type.String()) }) }),
      },
    },
    (req) => service.attempts(scope(req.auth), req.params.endpointId, req.query),
  );
  app.post(
    '/webhooks/:endpointId/events/:eventId/replay',
    {
      schema: {
        tags,
        summary: 'Send one event to this endpoint again (same event id); 409 while it is being delivered to it',
        params: Type.Object({ endpointId: Type.String({ minLength: 1, maxLength: 64 }), eventId: Type.String({ minLength: 1, maxLength: 64 }) }),
        response: withErrors({ 202: MessageSchema, 409: Type.Ref('ErrorBody') }),
      },
    },
    async (req, reply) => reply.code(202).send(await service.replay(scope(req.auth), req.params.endpointId, req.params.eventId)),
  );
  app.post(
    '/webhooks/:endpointId/recover',
    {
      schema: {
        tags,
        summary: 'Send again every event whose delivery to this endpoint failed, among those since `since`',
        params: EndpointParams,
        body: Type.Object({ since: IsoDateTime({ description: 'events made at or after this time' }) }, { additionalProperties: false }),
        response: withErrors({ 202: Type.Object({ recovered: Type.Integer() }), 409: Type.Ref('ErrorBody') }),
      },
    },
    async (req, reply) => reply.code(202).send(await service.recover(scope(req.auth), req.params.endpointId, req.body.since)),
  );
}

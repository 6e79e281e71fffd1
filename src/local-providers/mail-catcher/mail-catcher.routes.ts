import { Type } from '@sinclair/typebox';
import { MediaResponse, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { type AuthContext, requireEnv } from '../../modules/auth/auth.service.js';
import type { MailCatcherService } from './mail-catcher.service.js';

const Address = Type.Object({ name: Type.Optional(Type.String()), address: Type.String() });

const summaryProperties = {
    id: Type.String(),
    trackingId: Type.String(),
    userId: Type.Optional(Type.String()),
    messageId: Type.String({ description: 'Message-ID header, without angle brackets' }),
    from: Address,
    to: Address,
    cc: Type.Array(Type.String()),
    bcc: Type.Array(Type.String()),
    replyTo: Type.Array(Type.String()),
    subject: Type.String(),
    previewText: Type.Optional(Type.String()),
    attachments: Type.Array(
      Type.Object({
        filename: Type.String(),
        contentType: Type.Optional(Type.String()),
        size: Type.Integer(),
        source: Type.Union([Type.Literal('url'), Type.Literal('inline')]),
        url: Type.Optional(Type.String()),
      }),
    ),
    size: Type.Integer({ description: 'bytes of the raw MIME message' }),
    createdAt: Type.String(),
    deliveredExternally: Type.Literal(false),
    note: Type.String(),
};

const OutboxSummarySchema = Type.Object(summaryProperties, { $id: 'OutboxMessageSummary' });

const OutboxDetailSchema = Type.Object({
    ...summaryProperties,
    html: Type.String({ description: 'HTML part as sent (hidden preheader first)' }),
    text: Type.String({ description: 'text/plain alternative' }),
    headers: Type.Record(Type.String(), Type.String(), { description: 'top-level MIME headers, lower-case names' }),
    rawUrl: Type.String(),
    raw: Type.Optional(Type.String({ description: 'the message/rfc822 source, with ?includeRaw=true' })),
});

/**
 * The mail catcher's API, GET /outbox: mail kept locally because no SMTP server is configured
 * (the public paths keep the name "outbox"; the per-environment SMTP setting is modules/email's).
 */
export function mailCatcherRoutes(app: App, service: MailCatcherService): void {
  app.addSchema(OutboxSummarySchema);
  const tags = ['outbox'];
  const scope = (auth: AuthContext) => ({ accountId: auth.accountId, envId: requireEnv(auth) });

  app.get(
    '/outbox',
    {
      schema: {
        tags,
        summary: 'List mail kept in the local outbox (newest first); none of it was delivered externally',
        querystring: Type.Object({
          to: Type.Optional(Type.String({ maxLength: 320 })),
          trackingId: Type.Optional(Type.String({ maxLength: 200 })),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
          cursor: Type.Optional(Type.String({ maxLength: 500 })),
        }),
        response: withErrors({
          200: Type.Object({ messages: Type.Array(Type.Ref('OutboxMessageSummary')), nextCursor: Type.Optional(Type.String()) }),
        }),
      },
    },
    (req) => service.list(scope(req.auth), req.query),
  );

  app.get(
    '/outbox/:id',
    {
      schema: {
        tags,
        summary: 'One outbox message with its HTML, text and headers',
        params: Type.Object({ id: Type.String() }),
        querystring: Type.Object({ includeRaw: Type.Optional(Type.Boolean()) }),
        response: withErrors({ 200: OutboxDetailSchema }),
      },
    },
    (req) => service.get(scope(req.auth), req.params.id, req.query.includeRaw ?? false),
  );

  app.get(
    '/outbox/:id/raw',
    {
      schema: {
        tags,
        summary: 'The MIME source of an outbox message (message/rfc822, openable in a mail client)',
        params: Type.Object({ id: Type.String() }),
        response: withErrors({ 200: MediaResponse('message/rfc822', 'The message as it would have gone out') }),
      },
    },
    async (req, reply) => {
      const raw = await service.raw(scope(req.auth), req.params.id);
      return reply
        .type('message/rfc822')
        .header('content-disposition', `inline; filename="${req.params.id.replace(/[^\w.-]/g, '')}.eml"`)
        .send(raw);
    },
  );
}

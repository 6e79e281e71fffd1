import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { NotificationTypeId, withErrors } from '../../http/schemas.js';
import { DEFAULT_LIMITS } from '../../rendering/liquid.js';
import type { App } from '../../http/types.js';
import { emailSend, smsSend, testEmailSend } from './direct-sends.js';
import { type SendResponse, SendResponseSchema } from './sending.schemas.js';
import type { SendContext, SendingService } from './sending.service.js';

const Str = (max: number, description?: string) => Type.String({ maxLength: max, ...(description ? { description } : {}) });
const Addresses = Type.Array(Str(254), { maxItems: 50 });
const Schedule = Str(64, 'ISO 8601 date-time, at most a year ahead');

const EmailSendBody = Type.Object(
  {
    type: Type.String({ ...NotificationTypeId, description: 'notification type id; created if it does not exist' }),
    to: Str(254, 'email address of the recipient (its user id)'),
    subject: Str(998),
    html: Type.String({ maxLength: DEFAULT_LIMITS.parseLimit }),
    fromName: Type.Optional(Str(200)),
    fromAddress: Type.Optional(Str(254, 'the platform default sender or an address on a verified domain')),
    previewText: Type.Optional(Str(1000)),
    replyToAddresses: Type.Optional(Addresses),
    ccAddresses: Type.Optional(Addresses),
    bccAddresses: Type.Optional(Addresses),
    attachments: Type.Optional(Type.Array(Type.Object({ filename: Type.String({ minLength: 1, maxLength: 255 }), url: Type.String() }, { additionalProperties: false }), { maxItems: 20 })),
    schedule: Type.Optional(Schedule),
  },
  { additionalProperties: false },
);

const SmsSendBody = Type.Object(
  {
    type: NotificationTypeId,
    to: Str(32, 'phone number of the recipient, E.164 (or a US/Canada number)'),
    message: Type.Optional(Str(1600, 'optional when mediaUrls is given')),
    mediaUrls: Type.Optional(Type.Array(Str(2048), { maxItems: 10, minItems: 1 })),
    schedule: Type.Optional(Schedule),
    from: Type.Optional(Str(32, 'a number of the account')),
  },
  { additionalProperties: false, anyOf: [{ required: ['message'] }, { required: ['mediaUrls'] }] },
);

const TestEmailBody = Type.Object(
  {
    notificationId: NotificationTypeId,
    to: Str(254),
    subject: Str(998),
    html: Type.String({ maxLength: DEFAULT_LIMITS.parseLimit }),
    fromAddress: Str(254),
    fromName: Str(200),
    previewText: Type.Optional(Str(1000)),
  },
  { additionalProperties: false },
);

/** The single-channel sends of the pingram SDK (direct-sends.ts); answered as POST /send is. */
export function directSendRoutes(app: App, service: SendingService, context: (req: FastifyRequest) => SendContext): void {
  const tags = ['sending'];
  const response = withErrors({ 200: SendResponseSchema, 202: SendResponseSchema, 409: Type.Ref('ErrorBody'), 413: Type.Ref('ErrorBody') });
  const answer = (reply: FastifyReply, accepted: SendResponse) => {
    reply.status(accepted.messages.length > 0 ? 202 : 200);
    return accepted;
  };

  app.post('/email', { schema: { tags, summary: 'Send one email without a template (a send forced to EMAIL)', body: EmailSendBody, response } }, async (req, reply) =>
    answer(reply, await service.accept(context(req), emailSend(req.body))),
  );
  app.post('/sms', { schema: { tags, summary: 'Send one SMS or MMS without a template (a send forced to SMS)', body: SmsSendBody, response } }, async (req, reply) =>
    answer(reply, await service.accept(context(req), smsSend(req.body))),
  );
  app.post(
    '/sender/test/email',
    { schema: { tags, summary: 'Send a test email of a notification type to one address, from the given sender', body: TestEmailBody, response } },
    async (req, reply) => answer(reply, await service.accept(context(req), testEmailSend(req.body))),
  );
}

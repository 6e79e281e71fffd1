import { Type } from '@sinclair/typebox';
import { ChannelSchema, MessageSchema, NotificationTypeId, withErrors } from '../../http/schemas.js';
import type { App } from '../../http/types.js';
import { INTEGER_COLUMN_MAX } from '../../storage/schema.js';
import { requireEnv } from '../auth/auth.service.js';
import { DeduplicationSchema as Deduplication, ThrottlingSchema as Throttling, TypeOptionsSchema as Options } from './delivery-options.js';
import type { TypesService } from './types.service.js';

/** Template ids appear in URL paths: no slash, bounded length. */
export const PathId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[^/]+$' });

const Channels = Type.Array(ChannelSchema, { maxItems: 16 });
// Days. One `type` list, not a union: with coerceTypes a union's null branch turns 0 into null and
// an integer branch turns null into 0; Ajv coerces nothing that already has one of the listed types.
// The column is a 32-bit integer on PostgreSQL: larger values answered 500 there.
const Retention = Type.Optional(Type.Unsafe<number | null>({ type: ['integer', 'null'], minimum: 0, maximum: INTEGER_COLUMN_MAX }));
const Title = Type.String({ minLength: 1, maxLength: 200 });

const NotificationTypeSchema = Type.Object(
  {
    envId: Type.String(),
    notificationId: Type.String(),
    title: Type.String(),
    channels: Type.Array(Type.String()),
    enabled: Type.Boolean(),
    deduplication: Type.Optional(Deduplication),
    throttling: Type.Optional(Throttling),
    retention: Type.Optional(Type.Number()),
    options: Type.Optional(Type.Object({}, { additionalProperties: true })),
    templates: Type.Optional(Type.Array(Type.Object({ channel: Type.String(), templateIds: Type.Array(Type.String()) }))),
  },
  { $id: 'NotificationType' },
);

export function typeRoutes(app: App, service: TypesService): void {
  app.addSchema(NotificationTypeSchema);
  const tags = ['types'];
  const ref = Type.Ref('NotificationType');
  const params = Type.Object({ notificationId: NotificationTypeId });

  app.get(
    '/types',
    { schema: { tags, summary: 'List notification types with their template ids', response: withErrors({ 200: Type.Array(ref) }) } },
    (req) => service.list(req.auth.accountId, requireEnv(req.auth)),
  );

  app.post(
    '/types',
    {
      schema: {
        tags,
        summary: 'Create a notification type',
        body: Type.Object(
          {
            notificationId: NotificationTypeId,
            title: Title,
            channels: Channels,
            enabled: Type.Optional(Type.Boolean()),
            options: Type.Optional(Options),
            deduplication: Type.Optional(Type.Union([Deduplication, Type.Null()])),
            throttling: Type.Optional(Type.Union([Throttling, Type.Null()])),
            retention: Retention,
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: ref, 409: Type.Ref('ErrorBody') }),
      },
    },
    (req) => service.create(req.auth.accountId, requireEnv(req.auth), req.body),
  );

  // The SDK's getNotificationType reads an array (of one).
  app.get(
    '/types/:notificationId',
    { schema: { tags, summary: 'Get a notification type (as a one-element array)', params, response: withErrors({ 200: Type.Array(ref) }) } },
    async (req) => [await service.get(req.auth.accountId, requireEnv(req.auth), req.params.notificationId)],
  );

  app.patch(
    '/types/:notificationId',
    {
      schema: {
        tags,
        summary: 'Update a notification type',
        params,
        body: Type.Object(
          {
            title: Type.Optional(Title),
            channels: Type.Optional(Channels),
            enabled: Type.Optional(Type.Boolean()),
            options: Type.Optional(Options),
            deduplication: Type.Optional(Type.Union([Deduplication, Type.Null()])),
            throttling: Type.Optional(Type.Union([Throttling, Type.Null()])),
            retention: Retention,
          },
          { additionalProperties: false },
        ),
        response: withErrors({ 200: ref }),
      },
    },
    (req) => service.update(req.auth.accountId, requireEnv(req.auth), req.params.notificationId, req.body),
  );

  app.delete(
    '/types/:notificationId',
    { schema: { tags, summary: 'Delete a notification type with its templates', params, response: withErrors({ 200: MessageSchema }) } },
    async (req) => {
      await service.delete(req.auth.accountId, requireEnv(req.auth), req.params.notificationId);
      return { message: 'Notification type deleted' };
    },
  );
}

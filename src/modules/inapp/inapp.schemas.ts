import { type Static, Type } from '@sinclair/typebox';
import { MAX_PAGE_SIZE, MAX_REPLIES_PER_NOTIFICATION, MAX_REPLY_BYTES } from './inapp.service.js';

const ReplyMessage = Type.String({ maxLength: MAX_REPLY_BYTES, description: `at most ${MAX_REPLY_BYTES} bytes in UTF-8` });

const Reply = Type.Object({ date: Type.String({ maxLength: 100 }), message: ReplyMessage }, { $id: 'InappReply' });

/** A reply as a PATCH gives it: its date an ISO string or epoch seconds/milliseconds, as a string or a number (stored as ISO text). */
const ReplyInput = Type.Object(
  { date: Type.Union([Type.String({ maxLength: 100 }), Type.Number()], { description: 'ISO date or epoch seconds/milliseconds' }), message: ReplyMessage },
  { $id: 'InappReplyInput' },
);

const Enabled = Type.Object({ enabled: Type.Boolean() }, { additionalProperties: true });

export const InappNotificationSchema = Type.Object(
  {
    id: Type.String({ description: 'trackingId of the message' }),
    notificationId: Type.String(),
    subNotificationId: Type.Optional(Type.String()),
    seen: Type.Boolean(),
    title: Type.String(),
    redirectURL: Type.Optional(Type.String()),
    imageURL: Type.Optional(Type.String()),
    deliveryOptions: Type.Optional(
      Type.Object(
        {
          defaultDeliveryOption: Type.String({ enum: ['off', 'instant'] }),
          off: Type.Optional(Enabled),
          instant: Type.Optional(Enabled),
          batching: Type.Optional(Type.Boolean()),
          batchingKey: Type.Optional(Type.String()),
          batchingWindow: Type.Optional(Type.Number()),
        },
        { additionalProperties: true },
      ),
    ),
    template: Type.Optional(Type.Object({}, { additionalProperties: true })),
    parameters: Type.Optional(Type.Object({}, { additionalProperties: true })),
    date: Type.String(),
    opened: Type.Optional(Type.String()),
    clicked: Type.Optional(Type.String()),
    archived: Type.Optional(Type.String()),
    actioned1: Type.Optional(Type.String()),
    actioned2: Type.Optional(Type.String()),
    replies: Type.Optional(Type.Array(Type.Ref('InappReply'))),
    expDate: Type.Optional(Type.String()),
  },
  { $id: 'InappNotification' },
);

export const SHARED_SCHEMAS = [Reply, ReplyInput, InappNotificationSchema];

export const ListQuery = Type.Object({
  before: Type.Optional(Type.String({ description: 'epoch (s or ms) or ISO date; only notifications before it' })),
  count: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PAGE_SIZE, default: 10 })),
});

/** For /user/inapp called with an API key or JWT on behalf of a user. */
export const OnBehalfQuery = Type.Object({
  userId: Type.Optional(Type.String({ description: 'the user, when authenticating with an API key or JWT' })),
  userIdHash: Type.Optional(Type.String({ description: "with a public key in secure mode: the user's hash, base64(HMAC-SHA256(clientSecret, userId))" })),
  envId: Type.Optional(Type.String({ description: 'environment, when authenticating with a JWT' })),
});

export const ListResponse = Type.Object({ notifications: Type.Array(Type.Ref('InappNotification')) });
export const CountResponse = Type.Object({ count: Type.Integer() });
export const SuccessResponse = Type.Object({ success: Type.Boolean() });

/**
 * A timestamp (ISO or epoch), true for now, false or null to clear. Checked by the service: a
 * JSON-schema union would let ajv's type coercion turn `true` into "true".
 */
const StatusValue = Type.Unknown({
  description: 'ISO date or epoch (string or number) sets it, true sets it to now, false or null clears it',
});

export const PatchBody = Type.Object({
  trackingIds: Type.Array(Type.String(), { maxItems: MAX_PAGE_SIZE }),
  opened: Type.Optional(StatusValue),
  clicked: Type.Optional(StatusValue),
  archived: Type.Optional(StatusValue),
  actioned1: Type.Optional(StatusValue),
  actioned2: Type.Optional(StatusValue),
  reply: Type.Optional(Type.Ref('InappReplyInput')),
  replies: Type.Optional(Type.Array(Type.Ref('InappReplyInput'), { maxItems: MAX_REPLIES_PER_NOTIFICATION })),
});
type ReplyInputType = { date: string | number; message: string };
export type PatchBodyType = Static<typeof PatchBody> & { reply?: ReplyInputType; replies?: ReplyInputType[] };

export const MarkSeenBody = Type.Object({
  trackingId: Type.Optional(Type.String()),
  trackingIds: Type.Optional(Type.Array(Type.String(), { maxItems: MAX_PAGE_SIZE })),
  notificationId: Type.Optional(Type.String()),
});
export type MarkSeenBodyType = Static<typeof MarkSeenBody>;

export const ClientPathParams = Type.Object({ clientId: Type.String(), userId: Type.String() });
